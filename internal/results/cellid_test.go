package results

import (
	"reflect"
	"strings"
	"testing"
)

// One cell, every spelling: what people read, what compare matches on.
func TestCellIDSpellings(t *testing.T) {
	c := &Cell{Mode: "bridge", Path: "service", Provider: "iptables", ExtraServices: 1000, Test: "tcp_crr"}
	id := c.ID()
	if id.String() != "bridge/service(iptables+1000)/tcp_crr" || id.Key() != "bridge|service|iptables|tcp_crr|+1000" || id.Series() != "service(iptables+1000)" {
		t.Errorf("id %q key %q series %q", id, id.Key(), id.Series())
	}
	pod := CellID{Mode: "veth-routed", Path: "pod", Test: "tcp_stream"}
	if pod.String() != "veth-routed/pod/tcp_stream" || pod.Key() != "veth-routed|pod||tcp_stream" {
		t.Errorf("pod id %q key %q", pod, pod.Key())
	}
	pod.Placement = "cross-node"
	if pod.String() != "veth-routed/pod@cross-node/tcp_stream" || pod.Key() != "veth-routed|pod||tcp_stream|@cross-node" {
		t.Errorf("placed id %q key %q", pod, pod.Key())
	}
}

// Every coordinate is named as the cell's own field in the results JSON, and
// Coordinates/ParseCoordinates give the same CellID back.
func TestCellIDCoordinates(t *testing.T) {
	cell := reflect.TypeFor[Cell]()
	id := reflect.TypeFor[CellID]()
	for i := range id.NumField() {
		f := id.Field(i)
		cf, ok := cell.FieldByName(f.Name)
		if !ok {
			t.Errorf("CellID.%s has no Cell field of that name", f.Name)
			continue
		}
		want, _, _ := strings.Cut(cf.Tag.Get("json"), ",")
		if got := CoordinateNames()[i]; got != want {
			t.Errorf("CellID.%s is named %q, the results file's cell field %q", f.Name, got, want)
		}
	}
	c := CellID{Mode: "bridge", Path: "service", Provider: "nftables", ExtraServices: 1000, Placement: "cross-node", Test: "tcp_crr"}
	values := map[string]string{}
	for _, co := range c.Coordinates() {
		values[co.Name] = co.Value
	}
	if values["extra_services"] != "1000" || values["mode"] != "bridge" {
		t.Errorf("coordinates %v", values)
	}
	back, err := ParseCoordinates(values)
	if err != nil || back != c {
		t.Errorf("ParseCoordinates = %+v, %v; want %+v", back, err, c)
	}
	if _, err := ParseCoordinates(map[string]string{"colour": "red"}); err == nil {
		t.Error("an unknown coordinate was accepted")
	}
}

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

// An IPv6 cell names its family before the test and keys on it; an IPv4
// cell keeps the name and key files written before families had, and also
// answers to its name with ipv4 written out (ratio, --cells).
func TestCellIDFamily(t *testing.T) {
	v6 := CellID{Mode: "veth-routed", Path: "pod", Family: "ipv6", Test: "tcp_rr"}
	if v6.String() != "veth-routed/pod/ipv6/tcp_rr" || v6.Key() != "veth-routed|pod||tcp_rr|ipv6" {
		t.Errorf("ipv6 id %q key %q", v6, v6.Key())
	}
	v4 := v6
	v4.Family = ""
	if v4.String() != "veth-routed/pod/tcp_rr" || v4.Key() != "veth-routed|pod||tcp_rr" {
		t.Errorf("ipv4 id %q key %q", v4, v4.Key())
	}
	if got := v4.Names(); len(got) != 2 || got[1] != "veth-routed/pod/ipv4/tcp_rr" {
		t.Errorf("ipv4 names %v", got)
	}
	sel := CellPatterns{"*/pod/ipv4/*"}
	if !sel.Match(v4) || sel.Match(v6) {
		t.Errorf("%v selects ipv4 %v, ipv6 %v", sel, sel.Match(v4), sel.Match(v6))
	}
	if (CellPatterns{"veth-routed/pod/tcp_rr"}).Match(v6) {
		t.Error("the IPv4 name selected the IPv6 cell")
	}
	svc := CellID{Mode: "veth-ebpf", Path: "service", Provider: "ebpf", Family: "ipv6", Test: "tcp_crr"}
	if svc.String() != "veth-ebpf/service(ebpf)/ipv6/tcp_crr" {
		t.Errorf("service id %q", svc)
	}
}

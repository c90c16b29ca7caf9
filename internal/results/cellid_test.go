package results

import "testing"

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

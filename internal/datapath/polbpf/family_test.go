package polbpf

import (
	"testing"

	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// TestOpenFamilyIPv4: a plane made for IPv4 has one entry in each
// preallocated IPv6 map and its IPv4 maps at full size; a later Open adopts
// those sizes, and the programs, loaded on them, still decide IPv4 flows by
// their entries. (The IPv6 cases of TestFlows run on a dual plane: with a
// one-entry pol6_flows their replies would be dropped.)
func TestOpenFamilyIPv4(t *testing.T) {
	p := testPlaneFamily(t, family.IPv4)
	q, err := Open(p.Dir(), Frontends{})
	if err != nil {
		t.Fatalf("opened again: %v", err)
	}
	defer q.Close()
	for _, pl := range []*Plane{p, q} {
		if n := pl.maps.Pol6Flows.MaxEntries(); n != 1 {
			t.Errorf("pol6_flows: %d entries, want 1", n)
		}
		if n := pl.maps.Pol6Frags.MaxEntries(); n != 1 {
			t.Errorf("pol6_frags: %d entries, want 1", n)
		}
		if n := pl.maps.Pol4Flows.MaxEntries(); n <= 1 {
			t.Errorf("pol4_flows: %d entries: an IPv4 map keeps its size", n)
		}
	}
	if _, err := p.Load(testRules()); err != nil {
		t.Fatal(err)
	}
	out := frame{src: podA, dst: podB, proto: protoTCP, sport: 41000, dport: 8085}
	checkVerdicts(t, p, []verdictCase{
		{"reply before any flow", false, frame{src: podB, dst: podA, proto: protoTCP, sport: 8085, dport: 41000}, false},
		{"first packet", true, out, true},
		{"reply at pod-a's isolated ingress, by the flow's entry", false, frame{src: podB, dst: podA, proto: protoTCP, sport: 8085, dport: 41000}, true},
		{"denied: pod-c to pod-a", false, frame{src: podC, dst: podA, proto: protoTCP, sport: 41001, dport: 80}, false},
	})
	if _, err := q.programs(); err != nil {
		t.Errorf("programs on the adopted maps: %v", err)
	}
}

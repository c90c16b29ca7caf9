package polbpf

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// slotIDs are the inner maps' IDs in both slots of every rule map (0: none).
func slotIDs(t *testing.T, p *Plane) [10]uint32 {
	t.Helper()
	var ids [10]uint32
	for i, outer := range []*ebpf.Map{p.maps.PolRules, p.maps.Pol4Ipcache, p.maps.Pol6Ipcache, p.maps.Pol4Eps, p.maps.Pol6Eps} {
		for slot := uint32(0); slot < 2; slot++ {
			_ = outer.Lookup(slot, &ids[2*i+int(slot)])
		}
	}
	return ids
}

// TestLoadEditsSlots loads rule sets that grow, shrink and come back, and
// requires each time that the slot in force holds exactly the new entries
// (stale ones deleted from a slot edited in place), that the decisions
// follow, and that after the first two loads made both slots' maps, later
// loads edit those maps rather than swap in fresh ones (each swap makes the
// kernel wait a grace period).
func TestLoadEditsSlots(t *testing.T) {
	p := testPlane(t)
	a, c := netip.MustParseAddr("192.168.10.10"), netip.MustParseAddr("192.168.10.12")
	block := func(i int) netip.Addr {
		return netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", i>>8&0xff, i&0xff))
	}
	var made [10]uint32
	for i, n := range []int{200, 1, 50, 0, 200, 3} {
		w := scaleWorld(n, 0)
		r := netpol.Compile(w)
		st, err := p.Load(&r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Objects()
		if err != nil {
			t.Fatal(err)
		}
		if got != st.Entries {
			t.Errorf("load %d (%d policies): the slot in force holds %d entries, want %d", i, n, got, st.Entries)
		}
		cases := []verdictCase{{fmt.Sprintf("load %d: pod-c on 8080", i), false, frame{src: c, dst: a, proto: protoTCP, sport: uint16(46000 + i), dport: 8080}, false}}
		for _, j := range []int{0, 2, 49, 199} {
			cases = append(cases, verdictCase{fmt.Sprintf("load %d (%d policies): block %d", i, n, j), false,
				frame{src: block(j), dst: a, proto: protoTCP, sport: uint16(47000 + 10*i + j%10), dport: uint16(1000 + j)}, j < n})
		}
		checkVerdicts(t, p, cases)
		ids := slotIDs(t, p)
		switch {
		case i == 1:
			made = ids
			for k, id := range ids {
				if id == 0 {
					t.Fatalf("after two loads, rule map %d slot %d has no map", k/2, k%2)
				}
			}
		case i > 1 && ids != made:
			t.Errorf("load %d swapped maps in (inner map IDs %v, made %v): it should edit them", i, ids, made)
		}
	}
}

// TestLoadAfterAnotherWriter: a Load writes only what differs from what it
// last wrote to the slot, unless another plane on the same pins loaded
// since; then it reads the maps back, and the slot in force still holds
// exactly its entries.
func TestLoadAfterAnotherWriter(t *testing.T) {
	p := testPlane(t)
	other, err := Open(p.Dir(), Frontends{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i, step := range []struct {
		by *Plane
		n  int
	}{{p, 200}, {p, 100}, {other, 3}, {other, 150}, {p, 200}, {p, 10}} {
		r := netpol.Compile(scaleWorld(step.n, 0))
		st, err := step.by.Load(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := p.Objects(); err != nil {
			t.Fatal(err)
		} else if got != st.Entries {
			t.Errorf("load %d (%d policies): the slot in force holds %d entries, want %d", i, step.n, got, st.Entries)
		}
	}
}

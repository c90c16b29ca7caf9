package netpol_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// TestBuckets: each Allow is in bucket Hash mod n, in Allow order; the
// buckets taken from an earlier side for the Allows both share at their
// ends are those a fresh spread gives; Same tells a changed bucket.
func TestBuckets(t *testing.T) {
	var allow []*netpol.Allow
	for i := range 40 {
		allow = append(allow, &netpol.Allow{Pods: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})}, AnyPort: true})
	}
	const n = 8
	was := netpol.NewBuckets(allow, n, nil)
	for k := range n {
		in := was.In(k)
		if !slices.IsSorted(in) {
			t.Errorf("bucket %d holds %v, not in Allow order", k, in)
		}
		for _, i := range in {
			if int(allow[i].Hash()%n) != k || was.Key(int(i)) != k {
				t.Errorf("Allow %d is in bucket %d, its hash says %d", i, k, allow[i].Hash()%n)
			}
		}
		if len(in) > 0 != slices.Contains(was.Used, k) {
			t.Errorf("bucket %d: %d Allows, used %v", k, len(in), was.Used)
		}
	}
	extra := &netpol.Allow{AnyPeer: true, Ports: []netpol.PortRange{{Proto: netpol.TCP, First: 80, Last: 80}}}
	now := slices.Insert(slices.Clone(allow), 17, extra)
	if h, tl := netpol.CommonEnds(allow, now); h != 17 || tl != 23 {
		t.Errorf("CommonEnds: %d and %d, want 17 and 23", h, tl)
	}
	reused, fresh := netpol.NewBuckets(now, n, was), netpol.NewBuckets(now, n, nil)
	for k := range n {
		if !slices.Equal(reused.In(k), fresh.In(k)) {
			t.Errorf("bucket %d: %v taken from the side before, %v spread afresh", k, reused.In(k), fresh.In(k))
		}
		if changed := k == int(extra.Hash()%n); was.Same(reused, k) == changed {
			t.Errorf("bucket %d: Same says %v", k, !changed)
		}
	}
	var none *netpol.Buckets
	if none.In(3) != nil {
		t.Error("a nil side has Allows")
	}
}

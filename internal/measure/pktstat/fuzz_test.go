package pktstat

import (
	"encoding/binary"
	"math"
	"testing"
)

// snapshotOf reads a map dump from fuzz bytes: per key 3 bytes (namespace
// 1-3, ifindex, direction) and two CPUs' counts of 4 little-endian uint64s
// each, summed as Snapshot does.
func snapshotOf(b []byte) Snapshot {
	s := Snapshot{}
	const rec = 3 + 2*4*8
	for ; len(b) >= rec; b = b[rec:] {
		k := Key{NetNS: uint32(b[0]%3) + 1, Ifindex: uint32(b[1]), Dir: Dir(b[2] % 2)}
		var vals []pktsizePktCount
		for c := 0; c < 2; c++ {
			v := b[3+c*32:]
			vals = append(vals, pktsizePktCount{Packets: binary.LittleEndian.Uint64(v), Bytes: binary.LittleEndian.Uint64(v[8:]),
				Segs: binary.LittleEndian.Uint64(v[16:]), Max: binary.LittleEndian.Uint64(v[24:])})
		}
		sum := sumCPUs(vals)
		if sum.Max != max(vals[0].Max, vals[1].Max) || sum.Packets != vals[0].Packets+vals[1].Packets || sum.Bytes != vals[0].Bytes+vals[1].Bytes {
			panic("sumCPUs")
		}
		s[k] = sum
	}
	return s
}

// The packet-size counters as their per-CPU map dumps give them: two
// snapshots, summed over the CPUs; the later minus the earlier after
// adding gives back what was added (the keys that carried packets); the
// busiest device of a namespace and direction is the same whatever the
// map's order, with the most bytes; its side of the proof has finite
// averages; and the proof is nil only when neither end carried anything.
func FuzzSnapshot(f *testing.F) {
	rec := func(ns, ifindex, dir byte, c0, c1 [4]uint64) []byte {
		b := []byte{ns, ifindex, dir}
		for _, c := range [][4]uint64{c0, c1} {
			for _, v := range c {
				b = binary.LittleEndian.AppendUint64(b, v)
			}
		}
		return b
	}
	a := append(rec(0, 2, 0, [4]uint64{10, 15000, 100, 1500}, [4]uint64{5, 7000, 50, 1448}), rec(1, 3, 1, [4]uint64{20, 60000, 20, 65226}, [4]uint64{})...)
	d := append(rec(0, 2, 0, [4]uint64{1, 1500, 1, 1500}, [4]uint64{}), rec(0, 4, 0, [4]uint64{1, 1500, 1, 1500}, [4]uint64{})...)
	f.Add(a, d, false)
	f.Add(a, a, true)
	f.Add([]byte{}, d, false)
	f.Add(rec(0, 1, 0, [4]uint64{math.MaxUint64, math.MaxUint64, 0, 0}, [4]uint64{1, 1, 0, 0}), []byte{1}, false)
	f.Fuzz(func(t *testing.T, earlierB, deltaB []byte, sameNS bool) {
		earlier, delta := snapshotOf(earlierB), snapshotOf(deltaB)
		later := Snapshot{}
		later.Add(earlier)
		later.Add(delta)
		got := later.Sub(earlier)
		for k, c := range delta {
			g := got[k]
			if c.Packets > 0 && (g.Packets != c.Packets || g.Bytes != c.Bytes || g.Segs != c.Segs) {
				t.Fatalf("%+v: added %+v, later minus earlier %+v", k, c, g)
			}
		}
		for k, g := range got {
			if g.Packets == 0 || g != (Count{Packets: later[k].Packets - earlier[k].Packets, Bytes: later[k].Bytes - earlier[k].Bytes,
				Segs: later[k].Segs - earlier[k].Segs, Max: later[k].Max}) {
				t.Fatalf("%+v: difference %+v", k, g)
			}
		}
		var sides [2]*Side
		for i, d := range []Dir{Tx, Rx} {
			ino := uint32(i + 1)
			k, c := busiestOf(got, ino, d)
			for j := 0; j < 3; j++ {
				if k2, c2 := busiestOf(got, ino, d); k2 != k || c2 != c {
					t.Fatalf("busiest device of %d/%d: %+v, then %+v", ino, d, k, k2)
				}
			}
			for k2, c2 := range got {
				if k2.NetNS == ino && k2.Dir == d && c2.Bytes > c.Bytes {
					t.Fatalf("busiest %+v (%d bytes), yet %+v has %d", k, c.Bytes, k2, c2.Bytes)
				}
			}
			if c.Packets == 0 {
				continue
			}
			s := sideOf("ns", "eth0", c)
			if math.IsNaN(s.AvgBytes) || math.IsInf(s.AvgBytes, 0) || math.IsNaN(s.AvgSegment) || math.IsInf(s.AvgSegment, 0) {
				t.Fatalf("side %+v of %+v", s, c)
			}
			sides[i] = s
		}
		p := prove(sides[0], sides[1], sameNS)
		switch {
		case sides[0] == nil && sides[1] == nil:
			if p != nil {
				t.Fatalf("a proof of nothing: %+v", p)
			}
		case p == nil:
			t.Fatal("no proof of packets counted")
		case sameNS && p.Note != SameNS:
			t.Fatalf("same namespace, note %d", p.Note)
		case p.Note == Unseen && (p.Receiver != nil || p.Sender == nil):
			t.Fatalf("unseen, yet %+v", p)
		}
	})
}

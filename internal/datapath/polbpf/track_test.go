package polbpf

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
)

// TestTrackerMatchesCompile holds what Load writes to what Compile makes:
// random worlds (netpoltest) and random changes to them, each step's rules
// (a netpol.Compiler's) given to one tracker; after each step its entries
// must be Compile's, identities aside (each named by its prefix), and two
// slots written in turn with only the keys the tracker says changed since
// each was written must hold exactly its entries. No kernel: the slots are
// Go maps. Odd sequences give the tracker the Compiler's changes (their
// deltas), some steps making two changes before they are taken; even
// sequences give it the rules alone, which it compares.
//
// 50 sequences of 40 steps by default; VNETLAB_TRACK_SEQS and
// VNETLAB_TRACK_STEPS scale it, VNETLAB_TRACK_SEED=N runs sequence N alone.
func TestTrackerMatchesCompile(t *testing.T) {
	num := func(name string, def int) int {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s=%q: not a number", name, s)
			}
			return n
		}
		return def
	}
	seqs, steps, first := num("VNETLAB_TRACK_SEQS", 50), num("VNETLAB_TRACK_STEPS", 40), 1
	if os.Getenv("VNETLAB_TRACK_SEED") != "" {
		first, seqs = num("VNETLAB_TRACK_SEED", 0), 1
	}
	for seed := first; seed < first+seqs && !t.Failed(); seed++ {
		g := netpoltest.New(uint64(seed))
		c := netpol.NewCompilerOf(g.World, nil)
		tr := newTracker()
		var slots [2]*Entries
		for i := range slots {
			slots[i] = &Entries{EPs4: map[[4]byte]Endpoint{}, EPs6: map[[16]byte]Endpoint{}, Ipcache4: map[lpmKey4]uint32{},
				Ipcache6: map[lpmKey6]uint32{}, Rules: map[RuleKey]struct{}{}}
		}
		for step := 0; step <= steps; step++ {
			what := "the world loaded"
			withDeltas := seed%2 == 1
			if step > 0 {
				ch := g.Change()
				what = ch.String()
				ch.ApplyTo(c)
				if withDeltas && step%3 == 0 {
					ch := g.Change()
					what += "; " + ch.String()
					ch.ApplyTo(c)
				}
			}
			r := c.Rules()
			var changes []netpol.PodChange
			if withDeltas {
				changes = c.Changes()
			}
			tr.update(&r, changes)
			fail := func(msg string) {
				t.Errorf("sequence %d step %d (%s): %s\nthe world now:\n%s\nrerun: VNETLAB_TRACK_SEED=%d VNETLAB_TRACK_STEPS=%d go test -run TestTrackerMatchesCompile ./internal/datapath/polbpf/",
					seed, step, what, msg, g, seed, steps)
			}
			if got, want := named(tr.e), named(Compile(&r)); !slices.Equal(got, want) {
				fail(fmt.Sprintf("the tracker's entries differ from Compile's:\n%s", lineDiff(got, want)))
				break
			}
			s := step % 2
			writeSlot(slots[s], tr.dirty[s], tr.e)
			tr.dirty[s] = newChangedKeys()
			if got, want := named(slots[s]), named(tr.e); !slices.Equal(got, want) {
				fail(fmt.Sprintf("slot %d, written with the changed keys alone, differs from the entries:\n%s", s, lineDiff(got, want)))
				break
			}
		}
	}
}

// writeSlot writes the keys d names to slot s as entries hold them, as
// Load's syncKeys does to a slot's maps.
func writeSlot(s *Entries, d *changedKeys, e *Entries) {
	writeKeys(s.Rules, e.Rules, d.rules)
	writeKeys(s.EPs4, e.EPs4, d.eps4)
	writeKeys(s.EPs6, e.EPs6, d.eps6)
	writeKeys(s.Ipcache4, e.Ipcache4, d.ipcache4)
	writeKeys(s.Ipcache6, e.Ipcache6, d.ipcache6)
}

func writeKeys[K comparable, V any](m, from map[K]V, keys map[K]bool) {
	for k := range keys {
		if v, ok := from[k]; ok {
			m[k] = v
		} else {
			delete(m, k)
		}
	}
}

// named are entries as lines with every identity written as its prefix,
// sorted: two Entries that differ only in their identities' numbers give
// the same lines.
func named(e *Entries) []string {
	pfx := map[uint32]string{IDAny: "any"}
	for k, id := range e.Ipcache4 {
		pfx[id] = netip.PrefixFrom(netip.AddrFrom4(k.Addr), int(k.Prefixlen)).String()
	}
	for k, id := range e.Ipcache6 {
		pfx[id] = netip.PrefixFrom(netip.AddrFrom16(k.Addr), int(k.Prefixlen)).String()
	}
	name := func(id uint32) string {
		if s, ok := pfx[id]; ok {
			return s
		}
		return fmt.Sprintf("id %d (no prefix)", id)
	}
	var out []string
	for k, ep := range e.EPs4 {
		out = append(out, fmt.Sprintf("ep %s %s flags %d", netip.AddrFrom4(k), name(ep.ID), ep.Flags))
	}
	for k, ep := range e.EPs6 {
		out = append(out, fmt.Sprintf("ep %s %s flags %d", netip.AddrFrom16(k), name(ep.ID), ep.Flags))
	}
	for _, id := range slices.Collect(maps.Values(e.Ipcache4)) {
		out = append(out, "prefix "+name(id))
	}
	for _, id := range slices.Collect(maps.Values(e.Ipcache6)) {
		out = append(out, "prefix "+name(id))
	}
	for k := range e.Rules {
		out = append(out, fmt.Sprintf("rule %s <- %s dir %d proto %d port %d/%d", name(k.EP), name(k.Peer), k.Dir, k.Proto, k.Port>>8|k.Port<<8, k.Prefixlen))
	}
	slices.Sort(out)
	return out
}

// lineDiff is the lines only one of got and want has.
func lineDiff(got, want []string) string {
	var s string
	for _, l := range got {
		if !slices.Contains(want, l) {
			s += "+ " + l + "\n"
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			s += "- " + l + "\n"
		}
	}
	return s
}

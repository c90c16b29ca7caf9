package polbpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// Counters are the programs' counters (bpf/policy.h's POL_STAT_*), summed
// over CPUs.
type Counters struct {
	Unisolated, Flow, Allowed, Denied, Deferred uint64
	FragPass, FragDrop, Unparsed, NDP, Hairpin  uint64
}

// Evaluated is how many packets the policies looked at: those of an
// isolated pod's flows (passed by their flow's entry, decided, deferred to
// the backend) and the fragments and unparsable packets judged at an
// isolated pod.
func (c Counters) Evaluated() uint64 {
	return c.Flow + c.Allowed + c.Denied + c.Deferred + c.FragPass + c.FragDrop + c.Unparsed
}

// Dropped is how many packets the policies dropped.
func (c Counters) Dropped() uint64 { return c.Denied + c.FragDrop + c.Unparsed }

// Counters reads the programs' counters.
func (p *Plane) Counters() (Counters, error) {
	var c Counters
	for i, dst := range []*uint64{&c.Unisolated, &c.Flow, &c.Allowed, &c.Denied, &c.Deferred, &c.FragPass, &c.FragDrop, &c.Unparsed, &c.NDP, &c.Hairpin} {
		var per []uint64
		if err := p.maps.PolStats.Lookup(uint32(i), &per); err != nil {
			return c, fmt.Errorf("policy counters: %w", err)
		}
		for _, v := range per {
			*dst += v
		}
	}
	return c, nil
}

// ResetCounters sets every counter to zero (a fresh install's).
func (p *Plane) ResetCounters() error {
	n, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	zero := make([]uint64, n)
	for i := uint32(0); i < p.maps.PolStats.MaxEntries(); i++ {
		if err := p.maps.PolStats.Update(i, zero, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("policy counters: %w", err)
		}
	}
	return nil
}

// Objects counts the entries of the maps in force, read back from the
// kernel: endpoints, prefixes and rules.
func (p *Plane) Objects() (int, error) {
	gen, err := p.Gen()
	if err != nil {
		return 0, err
	}
	if gen == 0 {
		return 0, nil
	}
	slot := gen & 1
	total := 0
	for _, outer := range []*ebpf.Map{p.maps.PolRules, p.maps.Pol4Ipcache, p.maps.Pol6Ipcache, p.maps.Pol4Eps, p.maps.Pol6Eps} {
		var id uint32
		if err := outer.Lookup(slot, &id); err != nil {
			return 0, fmt.Errorf("policy map %s slot %d: %w", outer, slot, err)
		}
		inner, err := ebpf.NewMapFromID(ebpf.MapID(id))
		if err != nil {
			return 0, fmt.Errorf("policy map %s slot %d: %w", outer, slot, err)
		}
		n, err := countKeys(inner)
		inner.Close()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// countKeys walks m's keys (no values: one call per entry).
func countKeys(m *ebpf.Map) (int, error) {
	var prev any // nil: the first key
	next := make([]byte, m.KeySize())
	n := 0
	for {
		err := m.NextKey(prev, &next)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
		prev = append([]byte(nil), next...)
	}
}

package polbpf

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// LoadStats says what a Load wrote and how long each part took.
type LoadStats struct {
	Entries        int
	Compile, Write time.Duration
}

// Load makes r the rules in force. Only the entries of the pods whose
// rules differ from the last Load's are made again (tracker), and only the
// keys changed since the slot was last written are written. Each rule map has two slots
// (map-in-map) and pol_gen's low bit says which one the programs read: the
// slot not in force is edited to hold r (stale keys deleted, new or changed
// ones written), then the generation is bumped, one write: a packet sees
// the old rules or the new ones. Flows decided under the old rules are
// decided again at their initiator's next packet; replies still pass.
//
// A slot's maps are made once and edited in place after that, not swapped
// for fresh ones: every write to a map-in-map makes the kernel wait for a
// grace period (all running programs to finish), 5-18 ms each on this
// machine, so swapping the five maps cost 40-77 ms a change with no policy
// at all. Load waits for one grace period instead, after the bump, when
// the change is already in force: then no program still reads the slot
// it left, and the next Load may edit it.
func (p *Plane) Load(r *netpol.Rules) (LoadStats, error) { return p.LoadChanges(r, nil) }

// LoadChanges is Load with changes, the pods whose rules changed since the
// last Load (a netpol.Compiler's Changes): a pod's change that carries the
// Allows that came and went is made by those alone, its rules not compared
// with the last Load's. A change whose Old is not what the last Load held
// is not trusted: that pod is compared.
func (p *Plane) LoadChanges(r *netpol.Rules, changes []netpol.PodChange) (LoadStats, error) {
	start := time.Now()
	if p.track == nil {
		p.track = newTracker()
	}
	p.track.update(r, changes)
	e := p.track.e
	st := LoadStats{Entries: e.Count(), Compile: time.Since(start)}
	if err := p.fits(e); err != nil {
		return st, err
	}
	start = time.Now()
	gen, err := p.Gen()
	if err != nil {
		return st, err
	}
	slot := (gen + 1) & 1
	// When the slot holds what this plane last wrote there, only the keys
	// changed since are written, without reading the maps back.
	if gen != p.wroteGen {
		p.valid = [2]bool{} // another writer bumped it since
	}
	valid := p.valid[slot]
	p.valid[slot] = false
	d := p.track.dirty[slot]
	fills := []struct {
		outer *ebpf.Map
		name  string
		fill  func(*ebpf.Map) error
	}{
		{p.maps.PolRules, "pol_rules", func(m *ebpf.Map) error {
			return syncKeys(m, valid, d.rules, e.Rules, func(struct{}) uint8 { return 1 })
		}},
		{p.maps.Pol4Ipcache, "pol4_ipcache", func(m *ebpf.Map) error { return syncKeys(m, valid, d.ipcache4, e.Ipcache4, same[uint32]) }},
		{p.maps.Pol6Ipcache, "pol6_ipcache", func(m *ebpf.Map) error { return syncKeys(m, valid, d.ipcache6, e.Ipcache6, same[uint32]) }},
		{p.maps.Pol4Eps, "pol4_eps", func(m *ebpf.Map) error { return syncKeys(m, valid, d.eps4, e.EPs4, same[Endpoint]) }},
		{p.maps.Pol6Eps, "pol6_eps", func(m *ebpf.Map) error { return syncKeys(m, valid, d.eps6, e.EPs6, same[Endpoint]) }},
	}
	for _, f := range fills {
		inner, fresh, err := p.slotMap(f.outer, f.name, slot)
		if err != nil {
			return st, err
		}
		err = f.fill(inner)
		if err == nil && fresh {
			err = f.outer.Update(slot, inner, ebpf.UpdateAny)
		}
		inner.Close() // the outer map holds it
		if err != nil {
			return st, fmt.Errorf("policy map %s: %w", f.name, err)
		}
	}
	if err := p.maps.PolGen.Update(uint32(0), gen+1, ebpf.UpdateAny); err != nil {
		return st, fmt.Errorf("policy generation: %w", err)
	}
	p.track.dirty[slot] = newChangedKeys()
	p.valid[slot], p.wroteGen = true, gen+1
	st.Write = time.Since(start)
	return st, p.waitPrograms(slot)
}

// syncKeys makes m hold entries: the keys of dirty alone when m is known to
// hold entries but for those (valid), else every key, m read back.
func syncKeys[K comparable, V any, W comparable](m *ebpf.Map, valid bool, dirty map[K]bool, entries map[K]V, val func(V) W) error {
	if !valid {
		return syncAll(m, entries, val)
	}
	var keys []K
	var vals []W
	for k := range dirty {
		v, ok := entries[k]
		if !ok {
			if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				return err
			}
			continue
		}
		keys, vals = append(keys, k), append(vals, val(v))
	}
	return update(m, keys, vals)
}

// slotMap is the inner map in slot of outer, made (fresh) when the slot has
// none yet: the plane's first two Loads.
func (p *Plane) slotMap(outer *ebpf.Map, name string, slot uint32) (m *ebpf.Map, fresh bool, err error) {
	var id uint32
	err = outer.Lookup(slot, &id)
	if err == nil {
		m, err = ebpf.NewMapFromID(ebpf.MapID(id))
		if err != nil {
			return nil, false, fmt.Errorf("policy map %s slot %d: %w", name, slot, err)
		}
		return m, false, nil
	}
	if !errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, false, fmt.Errorf("policy map %s slot %d: %w", name, slot, err)
	}
	m, err = ebpf.NewMap(p.spec.Maps[name].InnerMap)
	if err != nil {
		return nil, false, fmt.Errorf("policy map %s: %w", name, err)
	}
	return m, true, nil
}

// waitPrograms returns once no program runs that read pol_gen before the
// last bump. The kernel waits so after any write to a map-in-map; writing
// the slot in force's own rule map back to it changes nothing else.
func (p *Plane) waitPrograms(slot uint32) error {
	var id uint32
	if err := p.maps.PolRules.Lookup(slot, &id); err != nil {
		return fmt.Errorf("policy map pol_rules slot %d: %w", slot, err)
	}
	m, err := ebpf.NewMapFromID(ebpf.MapID(id))
	if err != nil {
		return fmt.Errorf("policy map pol_rules slot %d: %w", slot, err)
	}
	defer m.Close()
	if err := p.maps.PolRules.Update(slot, m, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("policy map pol_rules slot %d: %w", slot, err)
	}
	return nil
}

func same[T any](v T) T { return v }

// syncAll makes m hold exactly entries (as val gives their values), read
// back: it deletes the keys entries lacks, and writes those that are new or
// hold another value.
func syncAll[K comparable, V any, W comparable](m *ebpf.Map, entries map[K]V, val func(V) W) error {
	var (
		stale []K
		keep  = map[K]bool{}
		k     K
		v     W
	)
	it := m.Iterate()
	for it.Next(&k, &v) {
		if e, ok := entries[k]; !ok {
			stale = append(stale, k)
		} else if val(e) == v {
			keep[k] = true
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, k := range stale {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
	}
	keys := make([]K, 0, len(entries)-len(keep))
	vals := make([]W, 0, len(entries)-len(keep))
	for k, e := range entries {
		if !keep[k] {
			keys = append(keys, k)
			vals = append(vals, val(e))
		}
	}
	return update(m, keys, vals)
}

// update writes keys with their values vals to m, in batches where the map
// type has them.
func update[K, W any](m *ebpf.Map, keys []K, vals []W) error {
	if len(keys) == 0 {
		return nil
	}
	if _, err := m.BatchUpdate(keys, vals, nil); err == nil {
		return nil
	} else if !errors.Is(err, ebpf.ErrNotSupported) {
		return err
	}
	for i := range keys {
		if err := m.Update(keys[i], vals[i], ebpf.UpdateAny); err != nil {
			return err
		}
	}
	return nil
}

// Gen is the generation of the rules in force (0: none loaded yet).
func (p *Plane) Gen() (uint32, error) {
	var gen uint32
	if err := p.maps.PolGen.Lookup(uint32(0), &gen); err != nil {
		return 0, fmt.Errorf("policy generation: %w", err)
	}
	return gen, nil
}

// fits refuses, before anything is written, entries the maps cannot hold.
func (p *Plane) fits(e *Entries) error {
	for _, c := range []struct {
		name, what string
		n          int
	}{
		{"pol_rules", "rule entries (peer identities x port prefixes per allow)", len(e.Rules)},
		{"pol4_ipcache", "IPv4 prefixes (pods' addresses, ipBlocks, excepts)", len(e.Ipcache4)},
		{"pol6_ipcache", "IPv6 prefixes (pods' addresses, ipBlocks, excepts)", len(e.Ipcache6)},
		{"pol4_eps", "IPv4 pod addresses", len(e.EPs4)},
		{"pol6_eps", "IPv6 pod addresses", len(e.EPs6)},
	} {
		if max := int(p.spec.Maps[c.name].InnerMap.MaxEntries); c.n > max {
			return fmt.Errorf("the policies compile to %d %s, more than the map %s holds (%d): use fewer or wider ipBlocks, or fewer pods per policy", c.n, c.what, c.name, max)
		}
	}
	return nil
}

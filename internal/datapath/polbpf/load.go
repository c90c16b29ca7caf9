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

// Load makes r the rules in force: fresh maps are filled in the slot the
// programs do not read, swapped in, and the generation bumped (one write:
// a packet sees the old rules or the new ones). Flows decided under the
// old rules are decided again at their initiator's next packet; replies
// still pass.
func (p *Plane) Load(r *netpol.Rules) (LoadStats, error) {
	start := time.Now()
	e := Compile(r)
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
	fills := []struct {
		outer *ebpf.Map
		name  string
		fill  func(*ebpf.Map) error
	}{
		{p.maps.PolRules, "pol_rules", func(m *ebpf.Map) error { return putAll(m, e.Rules, func(struct{}) uint8 { return 1 }) }},
		{p.maps.Pol4Ipcache, "pol4_ipcache", func(m *ebpf.Map) error { return putAll(m, e.Ipcache4, same[uint32]) }},
		{p.maps.Pol6Ipcache, "pol6_ipcache", func(m *ebpf.Map) error { return putAll(m, e.Ipcache6, same[uint32]) }},
		{p.maps.Pol4Eps, "pol4_eps", func(m *ebpf.Map) error { return putAll(m, e.EPs4, same[Endpoint]) }},
		{p.maps.Pol6Eps, "pol6_eps", func(m *ebpf.Map) error { return putAll(m, e.EPs6, same[Endpoint]) }},
	}
	for _, f := range fills {
		inner, err := ebpf.NewMap(p.spec.Maps[f.name].InnerMap)
		if err != nil {
			return st, fmt.Errorf("policy map %s: %w", f.name, err)
		}
		err = f.fill(inner)
		if err == nil {
			err = f.outer.Update(slot, inner, ebpf.UpdateAny)
		}
		inner.Close() // the outer map holds it now
		if err != nil {
			return st, fmt.Errorf("policy map %s: %w", f.name, err)
		}
	}
	if err := p.maps.PolGen.Update(uint32(0), gen+1, ebpf.UpdateAny); err != nil {
		return st, fmt.Errorf("policy generation: %w", err)
	}
	st.Write = time.Since(start)
	return st, nil
}

func same[T any](v T) T { return v }

// putAll writes every entry of m: in batches where the map type has them,
// else one by one.
func putAll[K comparable, V, W any](m *ebpf.Map, entries map[K]V, val func(V) W) error {
	if len(entries) == 0 {
		return nil
	}
	keys := make([]K, 0, len(entries))
	vals := make([]W, 0, len(entries))
	for k, v := range entries {
		keys = append(keys, k)
		vals = append(vals, val(v))
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

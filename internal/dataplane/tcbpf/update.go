package tcbpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// UpdateService replaces the backends (and the affinity) of an existing Service in place: its
// id stays, so flows already in the conntrack keep their backend (a flow
// to a backend that remains is never moved), and new flows pick among the
// new backends. Used by `vnetlab kube-proxy` for EndpointSlice changes; a
// delete and add would give the Service a new id and move every flow.
func (p *Plane) UpdateService(s Service) error {
	if err := s.Validate(); err != nil {
		return err
	}
	m := p.mapsOf(s.VIP)
	v, err := m.lookup(s)
	if err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("service %s: %w", s, ErrNotFound)
		}
		return fmt.Errorf("service %s: %w", s, err)
	}
	old := Service{VIP: s.VIP, Port: s.Port, Proto: s.Proto, External: s.External}
	old.Backends, _ = m.backendsOf(v)
	s.Backends = StableSlots(old.Backends, s.Backends)
	// The new backends' ports enter the prefilter before any packet can be
	// sent to them; the old ones leave it last.
	if err := p.countFilters([]Service{{VIP: s.VIP, Backends: s.Backends}}, +1); err != nil {
		return err
	}
	for slot, b := range s.Backends {
		if err := m.putBackend(v.Id, slot, b); err != nil {
			return fmt.Errorf("service %s: backend map: %w", s, err)
		}
	}
	// The count changes once the slots it covers are filled (growing) and
	// before the slots beyond it go (shrinking).
	if err := m.put(s, s.value(v.Id), ebpf.UpdateExist); err != nil {
		return fmt.Errorf("service %s: service map: %w", s, err)
	}
	for slot := len(s.Backends); slot < int(v.Count); slot++ {
		m.delBackend(v.Id, slot)
	}
	// countFilters also counted the clusterIP's /16 once more above: the
	// old entry takes it back with its backends.
	return p.countFilters([]Service{old}, -1)
}

// StableSlots orders backends `want` so that each one that was already in
// `old` keeps its slot where the new count allows: a client whose
// sessionAffinity remembers a slot keeps its backend across endpoint
// changes, as with kube-proxy. Slots are dense (a new flow takes slot
// hash % count), so a backend in a slot beyond the new count moves into a
// freed one; new backends fill the rest.
func StableSlots(old, want []Backend) []Backend {
	in := make(map[Backend]bool, len(want))
	for _, b := range want {
		if in[b] {
			return want // a backend listed twice (weighted by hand): as given
		}
		in[b] = true
	}
	out := make([]Backend, len(want))
	filled := make([]bool, len(want))
	placed := make(map[Backend]bool, len(want))
	for slot, b := range old {
		if slot < len(out) && in[b] && !placed[b] {
			out[slot], filled[slot], placed[b] = b, true, true
		}
	}
	free := 0
	for _, b := range want {
		if placed[b] {
			continue
		}
		for filled[free] {
			free++
		}
		out[free], filled[free], placed[b] = b, true, true
	}
	return out
}

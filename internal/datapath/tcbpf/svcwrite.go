package tcbpf

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
)

// AddService adds one Service; it fails (ErrExists) if vip:port/proto is taken.
func (p *Plane) AddService(s Service) error { return p.AddServices([]Service{s}) }

// AddServices adds many Services at once (thousands for scale tests): all
// are validated first, so bad input adds none.
func (p *Plane) AddServices(ss []Service) (err error) {
	seen := map[frontendKey]bool{}
	for _, s := range ss {
		if err := s.Validate(); err != nil {
			return err
		}
		if s.VIP.Is6() && !p.HasIPv6() {
			return fmt.Errorf("service %s: %w", s, ErrIPv4Only)
		}
		if seen[s.frontend()] {
			return fmt.Errorf("service %s is given twice", s)
		}
		seen[s.frontend()] = true
		if _, err := p.mapsOf(s.VIP).lookup(s); err == nil {
			return fmt.Errorf("service %s: %w (delete it first)", s, ErrExists)
		}
	}
	id, err := p.nextIDs(uint32(len(ss)))
	if err != nil {
		return err
	}
	// Prefilters first: a Service must never be in the map while the
	// programs' prefilter still says its clusterIP has none.
	if err := p.countFilters(ss, +1); err != nil {
		return err
	}
	added := 0
	defer func() {
		if err != nil { // all or nothing
			for _, s := range ss[:added] {
				_ = p.DelEntry(s)
			}
			_ = p.countFilters(ss[added:], -1)
		}
	}()
	for i := range ss {
		s := ss[i]
		m := p.mapsOf(s.VIP)
		// Backends first: the programs never see a count larger than the slots filled.
		slotted := s.slotted()
		for slot, b := range slotted {
			if uerr := m.putBackend(id, slot, b); uerr != nil {
				m.delBackends(id, slotted[:slot])
				err = fmt.Errorf("service %s: backend map: %w", s, uerr)
				return err
			}
		}
		if uerr := m.put(s, s.value(id), ebpf.UpdateNoExist); uerr != nil {
			m.delBackends(id, slotted)
			if errors.Is(uerr, ebpf.ErrKeyExist) {
				err = fmt.Errorf("service %s: %w", s, ErrExists)
			} else {
				err = fmt.Errorf("service %s: service map: %w", s, uerr)
			}
			return err
		}
		ss[i].ID = id
		added++
		id++
	}
	return nil
}

// nextIDs reserves n service ids from lb_meta. Ids are never reused, so
// conntrack entries of a deleted Service never match its successor.
func (p *Plane) nextIDs(n uint32) (uint32, error) {
	var zero, next uint32
	if err := p.objs.LbMeta.Lookup(&zero, &next); err != nil {
		return 0, fmt.Errorf("service id counter: %w", err)
	}
	if next == 0 {
		next = 1
	}
	if next+n < next || next+n > FirstAffinityID {
		return 0, fmt.Errorf("service ids exhausted: recreate the lab")
	}
	end := next + n
	if err := p.objs.LbMeta.Update(&zero, &end, ebpf.UpdateAny); err != nil {
		return 0, fmt.Errorf("service id counter: %w", err)
	}
	return next, nil
}

// delBackends empties the slots of Service id that hold bs (in slot order).
func (m svcMaps) delBackends(id uint32, bs []Backend) {
	for slot, b := range bs {
		m.delBackend(id, slot, b)
	}
}

// DelService removes a Service (its entry for every client). New
// connections and UDP flows stop being translated at once; an established
// TCP connection keeps its backend (its conntrack entry) until it ends or
// its entry is evicted, as with kube-proxy.
func (p *Plane) DelService(vip netip.Addr, port uint16, proto Proto) error {
	return p.DelEntry(Service{VIP: vip, Port: port, Proto: proto})
}

// DelEntry removes the entry s names (VIP, Port, Proto, External; the rest
// of s is ignored), as DelService.
func (p *Plane) DelEntry(s Service) error {
	m := p.mapsOf(s.VIP)
	name := s.String()
	v, err := m.lookup(s)
	if err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("service %s: %w", name, ErrNotFound)
		}
		return err
	}
	gone := Service{VIP: s.VIP, Port: s.Port, Proto: s.Proto}
	// Its backend ports leave the prefilter with it (a slot already gone
	// just counts for nothing).
	gone.Backends, _ = m.backendsOf(v)
	if err := m.del(s); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	m.delBackends(v.Id, gone.Backends)
	return p.countFilters([]Service{gone}, -1)
}

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
	// The backends for new flows keep their slots; the Draining ones follow.
	slotted := s.slotted()
	fresh := len(s.forNewFlows())
	s.Backends = slices.Concat(StableSlots(old.forNewFlows(), slotted[:fresh]), slotted[fresh:])
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
	// A backend that left a slot leaves lb_slots, unless it moved (then
	// lb_slots names its new slot already).
	for slot, b := range old.Backends[:min(len(old.Backends), len(s.Backends))] {
		if !sameAddr(b, s.Backends[slot]) {
			m.forgetSlot(v.Id, slot, b)
		}
	}
	// The count changes once the slots it covers are filled (growing) and
	// before the slots beyond it go (shrinking).
	if err := m.put(s, s.value(v.Id), ebpf.UpdateExist); err != nil {
		return fmt.Errorf("service %s: service map: %w", s, err)
	}
	for slot := len(s.Backends); slot < len(old.Backends); slot++ {
		m.delBackend(v.Id, slot, old.Backends[slot])
	}
	// countFilters also counted the clusterIP's /16 once more above: the
	// old entry takes it back with its backends.
	return p.countFilters([]Service{old}, -1)
}

// sameAddr: a and b are the same address and port (Draining or not).
func sameAddr(a, b Backend) bool { return a.IP == b.IP && a.Port == b.Port }

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

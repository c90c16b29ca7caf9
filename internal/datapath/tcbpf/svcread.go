package tcbpf

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cilium/ebpf"
)

// backendsOf reads a Service's backends, slot by slot (the Draining ones
// last, marked); on a missing slot it
// returns those read so far and the error.
func (m svcMaps) backendsOf(v serviceLbSvc) ([]Backend, error) {
	var out []Backend
	for slot := uint32(0); slot < uint32(v.Count)+uint32(v.Kept); slot++ {
		b, err := m.backend(v.Id, slot)
		if err != nil {
			return out, fmt.Errorf("backend slot %d: %w", slot, err)
		}
		b.Draining = slot >= uint32(v.Count)
		out = append(out, b)
	}
	return out, nil
}

// currentBackends re-reads Service s and its backends while another process
// may be rewriting them, until a reading is whole (a few tries, a
// millisecond apart at most); gone: s was deleted meanwhile.
func (m svcMaps) currentBackends(s Service) (bs []Backend, gone bool, err error) {
	for try := range 10 {
		var v serviceLbSvc
		v, err = m.lookup(s)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		if bs, err = m.backendsOf(v); !errors.Is(err, ebpf.ErrKeyNotExist) {
			return bs, false, err
		}
		time.Sleep(time.Duration(try) * 100 * time.Microsecond)
	}
	return bs, false, err
}

// ListServices returns every Service of both families, sorted by
// clusterIP (IPv4 first), port, protocol.
func (p *Plane) ListServices() ([]Service, error) {
	var out []Service
	for _, m := range p.families() {
		es, err := m.entries()
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			v := e.v
			s := Service{VIP: e.vip, Port: e.port, Proto: e.proto, ID: v.Id,
				External: e.external, HasExternal: v.Flags&svcExternal != 0}
			if v.Flags&svcAffinity != 0 {
				s.Affinity, s.AffinityID = v.AffinityTimeout, v.AffinityId
			}
			if s.Backends, err = m.backendsOf(v); errors.Is(err, ebpf.ErrKeyNotExist) {
				// A writer (the proxy's sync) changed the Service since
				// entries() read it: read it again as it is now.
				var gone bool
				s.Backends, gone, err = m.currentBackends(s)
				if gone {
					continue
				}
			}
			if err != nil {
				return nil, fmt.Errorf("service %s: %w", s, err)
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if c := a.VIP.Compare(b.VIP); c != 0 {
			return c < 0
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return !a.External && b.External
	})
	return out, nil
}

// ServiceEntries counts the entries of lab's Service frontends (lb_services
// and lb6_services) from their pins, read-only: it loads no program and
// creates nothing (0 when the plane has none).
func ServiceEntries(lab string) (int, error) {
	n := 0
	for _, name := range []string{serviceMapLbServices, serviceMapLb6Services} {
		if !HasPin(lab, name) {
			continue
		}
		err := ReadPinned(lab, name, func(m *ebpf.Map) error {
			keys, err := mapKeys(m)
			n += len(keys)
			return err
		})
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

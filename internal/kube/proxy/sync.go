package proxy

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/vnetlab/vnetlab/internal/dataplane/tcbpf"
)

// Plane is what the sync needs of a data plane (internal/dataplane/tcbpf's
// Plane; a fake in the unit tests).
type Plane interface {
	AddService(tcbpf.Service) error
	UpdateService(tcbpf.Service) error
	DelService(vip netip.Addr, port uint16, proto tcbpf.Proto) error
	ListServices() ([]tcbpf.Service, error)
}

// Changes counts what one sync did to the maps.
type Changes struct{ Added, Updated, Deleted int }

func (c Changes) Total() int { return c.Added + c.Updated + c.Deleted }

func (c *Changes) add(o Changes) {
	c.Added += o.Added
	c.Updated += o.Updated
	c.Deleted += o.Deleted
}

// Syncer keeps the data plane's Service map equal to the union of the
// Services' entries, touching only entries that changed: a Service's sync
// costs its own entries, whatever the number of other Services.
type Syncer struct {
	plane Plane
	// installed: what the maps hold (read from them at start, so a
	// restarted proxy changes only what changed while it was away).
	installed map[Key][]tcbpf.Backend
	// owner: which Service (namespace/name) an installed entry belongs to.
	owner map[Key]string
	// bySvc: each Service's entries.
	bySvc map[string]Entries
	// affinity: the session affinity timeout of an installed entry (0: none).
	affinity map[Key]uint32
}

// NewSyncer reads the plane's current entries.
func NewSyncer(p Plane) (*Syncer, error) {
	ss, err := p.ListServices()
	if err != nil {
		return nil, fmt.Errorf("read the Service map: %w", err)
	}
	s := &Syncer{plane: p, installed: map[Key][]tcbpf.Backend{}, owner: map[Key]string{}, bySvc: map[string]Entries{}, affinity: map[Key]uint32{}}
	for _, e := range ss {
		k := Key{VIP: e.VIP, Port: e.Port, Proto: e.Proto}
		s.installed[k] = e.Backends
		if e.Affinity > 0 {
			s.affinity[k] = e.Affinity
		}
	}
	return s, nil
}

// Sync makes Service name's entries (namespace/name) in the maps equal to
// want (nil or empty: the Service is gone), without session affinity.
func (s *Syncer) Sync(name string, want Entries) (Changes, error) { return s.SyncWith(name, want, 0) }

// SyncWith is Sync for a Service whose entries all carry a session
// affinity timeout (seconds, SessionAffinity; 0: none). An entry whose
// affinity changed is updated in place, like one whose backends did.
func (s *Syncer) SyncWith(name string, want Entries, affinity uint32) (Changes, error) {
	var ch Changes
	var errs []error
	for k := range s.bySvc[name] {
		if _, keep := want[k]; keep {
			continue
		}
		if s.owner[k] != name {
			continue // another Service took the entry over since
		}
		if err := s.del(k); err != nil {
			errs = append(errs, err)
			continue
		}
		ch.Deleted++
	}
	for k, bs := range want {
		if o, taken := s.owner[k]; taken && o != name {
			// The API refuses two Services on one clusterIP:port; this is a
			// moment between a delete and a create seen out of order.
			errs = append(errs, fmt.Errorf("%s: %s is Service %s's", name, k, o))
			continue
		}
		have, ok := s.installed[k]
		svc := tcbpf.Service{VIP: k.VIP, Port: k.Port, Proto: k.Proto, Backends: bs, Affinity: affinity}
		switch {
		case !ok:
			if err := s.plane.AddService(svc); err != nil {
				errs = append(errs, err)
				continue
			}
			ch.Added++
		case !sameBackends(have, bs) || s.affinity[k] != affinity:
			if err := s.plane.UpdateService(svc); err != nil {
				errs = append(errs, err)
				continue
			}
			ch.Updated++
		}
		s.installed[k] = bs
		s.owner[k] = name
		if affinity > 0 {
			s.affinity[k] = affinity
		} else {
			delete(s.affinity, k)
		}
	}
	if len(want) == 0 {
		delete(s.bySvc, name)
	} else {
		s.bySvc[name] = want
	}
	return ch, errors.Join(errs...)
}

func (s *Syncer) del(k Key) error {
	if err := s.plane.DelService(k.VIP, k.Port, k.Proto); err != nil && !errors.Is(err, tcbpf.ErrNotFound) {
		return err
	}
	delete(s.installed, k)
	delete(s.owner, k)
	delete(s.affinity, k)
	return nil
}

// Prune deletes the entries no Service claims: what the maps held from
// before this proxy started and the API no longer has. Called once the
// informers' first listing has been synced.
func (s *Syncer) Prune() (Changes, error) {
	var ch Changes
	var errs []error
	for k := range s.installed {
		if _, ok := s.owner[k]; ok {
			continue
		}
		if err := s.del(k); err != nil {
			errs = append(errs, err)
			continue
		}
		ch.Deleted++
	}
	return ch, errors.Join(errs...)
}

// Len is the number of entries installed.
func (s *Syncer) Len() int { return len(s.installed) }

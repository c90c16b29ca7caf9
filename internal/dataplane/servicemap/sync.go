// Package servicemap keeps a node's eBPF Service maps (the tc programs' and
// the socket programs' alike) equal to the Services wanted, touching only
// the entries that changed and updating a changed one in place: its id
// stays, so the flows it already carries keep their backends. It is the one
// reconciler: vnetlab's Kubernetes proxy (internal/kube/proxy) syncs each
// Service it follows through it, a lab's ebpf and ebpf-sock providers
// (internal/service) sync the lab's Services.
package servicemap

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vnetlab/vnetlab/internal/dataplane/tcbpf"
)

// Key is one entry of the data plane's Service map: clusterIP:port/proto.
type Key struct {
	VIP   netip.Addr
	Port  uint16
	Proto tcbpf.Proto
}

func (k Key) String() string { return fmt.Sprintf("%s/%s", netip.AddrPortFrom(k.VIP, k.Port), k.Proto) }

// Entries are a Service's desired map entries, each with its backends
// sorted (so that two computations of the same state compare equal).
type Entries map[Key][]tcbpf.Backend

// sameBackends says whether two backend lists hold the same backends. b is
// sorted (Translate's); a may be in the maps' slot order, which
// UpdateService keeps stable rather than sorted.
func sameBackends(a, b []tcbpf.Backend) bool {
	return slices.Equal(slices.SortedFunc(slices.Values(a), tcbpf.CompareBackends), b)
}

// Plane is what the sync needs of a data plane (internal/dataplane/tcbpf's
// Plane, or sock's; a fake in the unit tests). A plane that also adds many
// Services at once (BatchPlane) gets a sync's new entries in one call.
type Plane interface {
	AddService(tcbpf.Service) error
	UpdateService(tcbpf.Service) error
	DelService(vip netip.Addr, port uint16, proto tcbpf.Proto) error
	ListServices() ([]tcbpf.Service, error)
}

// BatchPlane adds many Services in one call (tcbpf.Plane.AddServices: a
// lab's 100k generated Services load in one pass), all or none.
type BatchPlane interface {
	AddServices([]tcbpf.Service) error
}

// Changes counts what one sync did to the maps.
type Changes struct{ Added, Updated, Deleted int }

func (c Changes) Total() int { return c.Added + c.Updated + c.Deleted }

// Add counts o too.
func (c *Changes) Add(o Changes) {
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
	var add []tcbpf.Service
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
			add = append(add, svc)
			continue
		case !sameBackends(have, bs) || s.affinity[k] != affinity:
			if err := s.plane.UpdateService(svc); err != nil {
				errs = append(errs, err)
				continue
			}
			ch.Updated++
		}
		s.installed[k] = bs
		s.owner[k] = name
		s.setAffinity(k, affinity)
	}
	for _, svc := range s.addAll(add, &errs) {
		k := Key{VIP: svc.VIP, Port: svc.Port, Proto: svc.Proto}
		s.installed[k], s.owner[k] = want[k], name
		s.setAffinity(k, affinity)
		ch.Added++
	}
	if len(want) == 0 {
		delete(s.bySvc, name)
	} else {
		s.bySvc[name] = want
	}
	return ch, errors.Join(errs...)
}

func (s *Syncer) setAffinity(k Key, affinity uint32) {
	if affinity > 0 {
		s.affinity[k] = affinity
	} else {
		delete(s.affinity, k)
	}
}

// addAll adds svcs to the maps, in one call when the plane takes many (if
// that fails, one by one, so that each bad entry is named and the others
// still go in), and returns those added.
func (s *Syncer) addAll(svcs []tcbpf.Service, errs *[]error) []tcbpf.Service {
	if b, ok := s.plane.(BatchPlane); ok && len(svcs) > 1 {
		if err := b.AddServices(svcs); err == nil {
			return svcs
		}
	}
	var added []tcbpf.Service
	for _, svc := range svcs {
		if err := s.plane.AddService(svc); err != nil {
			*errs = append(*errs, err)
			continue
		}
		added = append(added, svc)
	}
	return added
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

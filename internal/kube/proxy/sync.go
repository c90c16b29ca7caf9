package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vnetlab/vnetlab/internal/dataplane/tcbpf"
)

// Plane is what the sync needs of a data plane (internal/dataplane/tcbpf's
// Plane; a fake in the unit tests).
type Plane interface {
	AddService(tcbpf.Service) error
	UpdateService(tcbpf.Service) error
	DelEntry(tcbpf.Service) error
	ListServices() ([]tcbpf.Service, error)
}

// FlowCleaner forgets the conntrack entries of UDP flows whose backend a
// frontend no longer has (tcbpf.Plane.ForgetUDPFlows).
type FlowCleaner interface {
	ForgetUDPFlows(keep map[netip.AddrPort][]tcbpf.Backend) (int, error)
}

// Changes counts what one sync did to the maps.
type Changes struct{ Added, Updated, Deleted int }

func (c Changes) Total() int { return c.Added + c.Updated + c.Deleted }

func (c *Changes) add(o Changes) {
	c.Added += o.Added
	c.Updated += o.Updated
	c.Deleted += o.Deleted
}

// installed is what the maps hold for one entry.
type installed struct {
	backends    []tcbpf.Backend
	affinity    uint32 // session affinity timeout (0: none)
	hasExternal bool   // an External entry of the same frontend serves outside clients
}

// Syncer keeps the data plane's Service map equal to the union of the
// Services' entries, touching only entries that changed: a Service's sync
// costs its own entries, whatever the number of other Services.
type Syncer struct {
	plane Plane
	// installed: what the maps hold (read from them at start, so a
	// restarted proxy changes only what changed while it was away).
	installed map[Key]installed
	// owner: which Service (namespace/name) an installed entry belongs to.
	owner map[Key]string
	// bySvc: each Service's entries.
	bySvc map[string]Entries
}

// NewSyncer reads the plane's current entries.
func NewSyncer(p Plane) (*Syncer, error) {
	ss, err := p.ListServices()
	if err != nil {
		return nil, fmt.Errorf("read the Service map: %w", err)
	}
	s := &Syncer{plane: p, installed: map[Key]installed{}, owner: map[Key]string{}, bySvc: map[string]Entries{}}
	for _, e := range ss {
		k := Key{VIP: e.VIP, Port: e.Port, Proto: e.Proto, External: e.External}
		s.installed[k] = installed{backends: e.Backends, affinity: e.Affinity, hasExternal: e.HasExternal}
	}
	return s, nil
}

// Sync makes Service name's entries (namespace/name) in the maps equal to
// want (nil or empty: the Service is gone), without session affinity.
func (s *Syncer) Sync(name string, want Entries) (Changes, error) { return s.SyncWith(name, want, 0) }

// SyncWith is Sync for a Service whose entries all carry a session
// affinity timeout (seconds, SessionAffinity; 0: none). An entry whose
// affinity changed is updated in place, like one whose backends did. An
// entry whose frontend also has an External entry is marked so
// (tcbpf.Service.HasExternal). Writes come first, External entries before
// the entries that point to them; deletes last, entries for every client
// before External ones: the programs never follow a mark to nothing.
func (s *Syncer) SyncWith(name string, want Entries, affinity uint32) (Changes, error) {
	var ch Changes
	var errs []error
	for _, k := range sortedKeys(want) {
		bs := want[k]
		if o, taken := s.owner[k]; taken && o != name {
			// The API refuses two Services on one clusterIP:port; this is a
			// moment between a delete and a create seen out of order.
			errs = append(errs, fmt.Errorf("%s: %s is Service %s's", name, k, o))
			continue
		}
		ext := Key{VIP: k.VIP, Port: k.Port, Proto: k.Proto, External: true}
		hasExt := !k.External && s.owner[ext] == name // written above, or before
		if _, wanted := want[ext]; !wanted {
			hasExt = false
		}
		have, ok := s.installed[k]
		svc := tcbpf.Service{VIP: k.VIP, Port: k.Port, Proto: k.Proto, External: k.External, Backends: bs, Affinity: affinity, HasExternal: hasExt}
		switch {
		case !ok:
			if err := s.plane.AddService(svc); err != nil {
				errs = append(errs, err)
				continue
			}
			ch.Added++
		case !sameBackends(have.backends, bs) || have.affinity != affinity || have.hasExternal != hasExt:
			if err := s.plane.UpdateService(svc); err != nil {
				errs = append(errs, err)
				continue
			}
			ch.Updated++
		}
		s.installed[k] = installed{backends: bs, affinity: affinity, hasExternal: hasExt}
		s.owner[k] = name
	}
	gone := Entries{}
	for k := range s.bySvc[name] {
		if _, keep := want[k]; !keep && s.owner[k] == name { // else another Service took it over since
			gone[k] = nil
		}
	}
	d, err := s.delete(gone)
	ch.add(d)
	errs = append(errs, err)
	if len(want) == 0 {
		delete(s.bySvc, name)
	} else {
		s.bySvc[name] = want
	}
	return ch, errors.Join(errs...)
}

// delete removes entries, those for every client first (their marks
// point to the External ones).
func (s *Syncer) delete(es Entries) (Changes, error) {
	var ch Changes
	var errs []error
	keys := sortedKeys(es)
	slices.Reverse(keys)
	for _, k := range keys {
		if err := s.del(k); err != nil {
			errs = append(errs, err)
			continue
		}
		ch.Deleted++
	}
	return ch, errors.Join(errs...)
}

// sortedKeys orders a Service's keys External first (so that an External
// entry exists before its frontend's other entry points to it), then by
// frontend: the map calls come in one order, whatever Go's map order.
func sortedKeys(es Entries) []Key {
	ks := make([]Key, 0, len(es))
	for k := range es {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b Key) int {
		if a.External != b.External {
			if a.External {
				return -1
			}
			return 1
		}
		if c := a.Frontend().Compare(b.Frontend()); c != 0 {
			return c
		}
		return int(a.Proto) - int(b.Proto)
	})
	return ks
}

func (s *Syncer) del(k Key) error {
	e := tcbpf.Service{VIP: k.VIP, Port: k.Port, Proto: k.Proto, External: k.External}
	if err := s.plane.DelEntry(e); err != nil && !errors.Is(err, tcbpf.ErrNotFound) {
		return err
	}
	delete(s.installed, k)
	delete(s.owner, k)
	return nil
}

// Prune deletes the entries no Service claims: what the maps held from
// before this proxy started and the API no longer has. Called once the
// informers' first listing has been synced.
func (s *Syncer) Prune() (Changes, error) {
	orphans := Entries{}
	for k := range s.installed {
		if _, ok := s.owner[k]; !ok {
			orphans[k] = nil
		}
	}
	return s.delete(orphans)
}

// Len is the number of entries installed.
func (s *Syncer) Len() int { return len(s.installed) }

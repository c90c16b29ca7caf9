// Package svcsync keeps a node's eBPF Service maps (the tc programs' and
// the socket programs' alike) equal to the Services wanted, touching only
// the entries that changed and updating a changed one in place: its id
// stays, so the flows it already carries keep their backends. It is the one
// reconciler: vnetlab's Kubernetes proxy (internal/kube/proxy) syncs each
// Service it follows through it, a lab's ebpf and ebpf-sock providers
// (internal/platform/labservice) sync the lab's Services.
package svcsync

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// Key is one entry of the data plane's Service map: the frontend
// (clusterIP, node IP or external IP):port/proto, and for External entries
// the clients outside the node only (tcbpf.Service.External).
type Key struct {
	VIP      netip.Addr
	Port     uint16
	Proto    tcbpf.Proto
	External bool
}

func (k Key) String() string { return k.entry().String() }

// entry is the map entry k names, without backends (what DelEntry takes).
func (k Key) entry() tcbpf.Service {
	return tcbpf.Service{VIP: k.VIP, Port: k.Port, Proto: k.Proto, External: k.External}
}

// Frontend is the address and port clients reach.
func (k Key) Frontend() netip.AddrPort { return netip.AddrPortFrom(k.VIP, k.Port) }

// KeyOf is the key of a map entry.
func KeyOf(e tcbpf.Service) Key {
	return Key{VIP: e.VIP, Port: e.Port, Proto: e.Proto, External: e.External}
}

// Entries are a Service's desired map entries, each with its backends
// sorted (so that two computations of the same state compare equal).
type Entries map[Key][]tcbpf.Backend

// sameBackends says whether two backend lists hold the same backends. b is
// sorted (Translate's); a may be in the maps' slot order, which
// UpdateService keeps stable rather than sorted.
func sameBackends(a, b []tcbpf.Backend) bool {
	return slices.Equal(slices.SortedFunc(slices.Values(a), tcbpf.CompareBackends), b)
}

// Plane is what the sync needs of a data plane (internal/datapath/tcbpf's
// Plane, or sock's; a fake in the unit tests). A plane that also adds many
// Services at once (BatchPlane) gets a sync's new entries in one call.
type Plane interface {
	AddService(tcbpf.Service) error
	UpdateService(tcbpf.Service) error
	DelEntry(tcbpf.Service) error
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

// installed is what the maps hold for one entry.
type installed struct {
	backends    []tcbpf.Backend
	affinity    uint32 // session affinity timeout (0: none)
	affinityID  uint32 // whose memory it keeps (tcbpf.Service.AffinityID; 0: its own)
	hasExternal bool   // an External entry of the same frontend serves outside clients
}

// Ports name the Service port each entry of a Service serves: under
// sessionAffinity the entries of one port (its clusterIPs, node ports and
// external IPs) share a client's memory, as kube-proxy's do. An entry not
// named keeps its own.
type Ports map[Key]string

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
	// groups: each Service's ports' affinity ids (Ports), lastGroup the
	// id given last.
	groups    map[string]map[string]uint32
	lastGroup uint32
}

// NewSyncer reads the plane's current entries.
func NewSyncer(p Plane) (*Syncer, error) {
	ss, err := p.ListServices()
	if err != nil {
		return nil, fmt.Errorf("read the Service map: %w", err)
	}
	s := &Syncer{plane: p, installed: map[Key]installed{}, owner: map[Key]string{}, bySvc: map[string]Entries{},
		groups: map[string]map[string]uint32{}, lastGroup: tcbpf.FirstAffinityID - 1}
	for _, e := range ss {
		s.installed[KeyOf(e)] = installed{backends: e.Backends, affinity: e.Affinity, affinityID: e.AffinityID, hasExternal: e.HasExternal}
		s.lastGroup = max(s.lastGroup, e.AffinityID)
	}
	return s, nil
}

// Sync makes Service name's entries (namespace/name) in the maps equal to
// want (nil or empty: the Service is gone), without session affinity.
func (s *Syncer) Sync(name string, want Entries) (Changes, error) {
	return s.SyncPorts(name, want, 0, nil)
}

// SyncPorts is Sync for a Service whose entries all carry a session
// affinity timeout (seconds, SessionAffinity; 0: none); the entries of one
// Service port (ports; nil: each entry its own) share sessionAffinity's
// memory. An entry whose affinity changed is updated in place, like one
// whose backends did. An
// entry whose frontend also has an External entry is marked so
// (tcbpf.Service.HasExternal). Writes come first, External entries before
// the entries that point to them; deletes last, entries for every client
// before External ones: the programs never follow a mark to nothing.
func (s *Syncer) SyncPorts(name string, want Entries, affinity uint32, ports Ports) (Changes, error) {
	var ch Changes
	var errs []error
	keys := sortedKeys(want)
	ids := s.affinityIDs(name, want, affinity, ports)
	split := 0 // keys[:split] are the External entries
	for split < len(keys) && keys[split].External {
		split++
	}
	// The External entries are written before the entries that point to them.
	s.write(name, keys[:split], want, affinity, ids, &ch, &errs)
	s.write(name, keys[split:], want, affinity, ids, &ch, &errs)
	gone := Entries{}
	for k := range s.bySvc[name] {
		if _, keep := want[k]; !keep && s.owner[k] == name { // else another Service took it over since
			gone[k] = nil
		}
	}
	d, err := s.delete(gone)
	ch.Add(d)
	errs = append(errs, err)
	if len(want) == 0 {
		delete(s.bySvc, name)
		delete(s.groups, name)
	} else {
		s.bySvc[name] = want
	}
	return ch, errors.Join(errs...)
}

// write makes the entries keys of Service name equal to want's: those
// changed are updated in place, the new ones added (in one call when the
// plane takes many).
func (s *Syncer) write(name string, keys []Key, want Entries, affinity uint32, ids map[Key]uint32, ch *Changes, errs *[]error) {
	var add []tcbpf.Service
	for _, k := range keys {
		bs := want[k]
		if o, taken := s.owner[k]; taken && o != name {
			// The API refuses two Services on one clusterIP:port; this is a
			// moment between a delete and a create seen out of order.
			*errs = append(*errs, fmt.Errorf("%s: %s is Service %s's", name, k, o))
			continue
		}
		ext := Key{VIP: k.VIP, Port: k.Port, Proto: k.Proto, External: true}
		hasExt := !k.External && s.owner[ext] == name // written before
		if _, wanted := want[ext]; !wanted {
			hasExt = false
		}
		have, ok := s.installed[k]
		svc := tcbpf.Service{VIP: k.VIP, Port: k.Port, Proto: k.Proto, External: k.External, Backends: bs, Affinity: affinity, AffinityID: ids[k], HasExternal: hasExt}
		switch {
		case !ok:
			add = append(add, svc)
			continue
		case !sameBackends(have.backends, bs) || have.affinity != affinity || have.affinityID != ids[k] || have.hasExternal != hasExt:
			if err := s.plane.UpdateService(svc); err != nil {
				*errs = append(*errs, err)
				continue
			}
			ch.Updated++
		}
		s.installed[k] = installed{backends: bs, affinity: affinity, affinityID: ids[k], hasExternal: hasExt}
		s.owner[k] = name
	}
	for _, svc := range s.addAll(add, errs) {
		k := KeyOf(svc)
		s.installed[k] = installed{backends: want[k], affinity: affinity, affinityID: svc.AffinityID, hasExternal: svc.HasExternal}
		s.owner[k] = name
		ch.Added++
	}
}

// affinityIDs gives each entry of Service name that ports names, under
// sessionAffinity, its port's affinity id: the one the port had, else one
// its entries hold in the maps (a restarted proxy keeps the memories),
// else a new one.
func (s *Syncer) affinityIDs(name string, want Entries, affinity uint32, ports Ports) map[Key]uint32 {
	if affinity == 0 || len(ports) == 0 {
		delete(s.groups, name)
		return nil
	}
	had := s.groups[name]
	now := map[string]uint32{}
	ids := map[Key]uint32{}
	for _, k := range sortedKeys(want) {
		port, ok := ports[k]
		if !ok {
			continue
		}
		id, ok := now[port]
		if !ok {
			id, ok = had[port]
		}
		if !ok {
			if id = s.installed[k].affinityID; id == 0 || s.installed[k].affinity == 0 || s.owner[k] != "" && s.owner[k] != name {
				s.lastGroup++
				id = s.lastGroup
			}
		}
		now[port] = id
		ids[k] = id
	}
	s.groups[name] = now
	return ids
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
	if err := s.plane.DelEntry(k.entry()); err != nil && !errors.Is(err, tcbpf.ErrNotFound) {
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

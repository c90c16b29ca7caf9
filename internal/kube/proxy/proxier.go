package proxy

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/kube/resync"
)

// Proxier is one node's Service proxy, shaped like kube-proxy's nftables
// proxier: the informers' handlers record changes in the change trackers
// (changes.go, resync.Changes), Sync applies them to the node's Service maps, and Loop runs
// Sync whenever something was recorded. Sync needs no cluster: the unit
// tests feed the handlers objects and read a fake Plane.
type Proxier struct {
	node    string       // the node's Kubernetes name (internalTrafficPolicy Local)
	nodeIPs []netip.Addr // where NodePorts answer: at most one address per family
	syncer  *svcsync.Syncer
	clean   *udpCleaner // forgets stale UDP flows after the syncs (udpclean.go)
	health  healthSetter
	metrics *Metrics     // kube-proxy's metrics (nil: none; Instrument)
	status  *proxyHealth // the proxy health server's view of the syncs (nil: none)
	logf    func(string, ...any)

	services resync.Changes[corev1.Service]
	slices   sliceChanges
	nodes    nodeChanges
	kick     resync.Kick // a change was recorded

	zone string // the node's zone, as the syncs applied it (zone hints)

	// What the syncs applied: the Services, their slices by name, and
	// their UDP frontends with the backends their flows may keep.
	svcs   map[string]*corev1.Service
	eps    map[string]map[string]*discoveryv1.EndpointSlice
	udp    map[string]map[netip.AddrPort][]tcbpf.Backend
	failed map[string]bool // Services whose last sync failed: synced again next time
	primed bool            // the first sync (prune, every stale flow) is done
}

// healthSetter runs the healthCheckNodePort servers (healthServers).
type healthSetter interface {
	Set(name string, port uint16, local int) error
}

// NewProxier reads the plane's current entries (a restarted proxy changes
// only what changed while it was away).
func NewProxier(node string, nodeIPs []netip.Addr, plane svcsync.Plane, flows FlowCleaner, health healthSetter, logf func(string, ...any)) (*Proxier, error) {
	syncer, err := svcsync.NewSyncer(plane)
	if err != nil {
		return nil, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Proxier{node: node, nodeIPs: nodeIPs, syncer: syncer, clean: newUDPCleaner(flows, logf), health: health, logf: logf,
		kick: resync.NewKick(), slices: sliceChanges{since: time.Now()},
		svcs: map[string]*corev1.Service{}, eps: map[string]map[string]*discoveryv1.EndpointSlice{},
		udp: map[string]map[netip.AddrPort][]tcbpf.Backend{}, failed: map[string]bool{}}, nil
}

// ServiceHandler and SliceHandler are the informers' event handlers: they
// record the change and wake Loop.
func (p *Proxier) ServiceHandler() cache.ResourceEventHandler {
	return p.handler(p.services.Record)
}

func (p *Proxier) SliceHandler() cache.ResourceEventHandler { return p.handler(p.slices.record) }

// Instrument has the proxier keep m (kube-proxy's metrics, metrics.go).
func (p *Proxier) Instrument(m *Metrics) { p.metrics = m }

// changed notes a recorded change and wakes Loop.
func (p *Proxier) changed() {
	p.status.queued()
	p.kick.Now()
}

// NodeHandler follows the proxy's own Node (an informer on its name): the
// proxy health server's nodeEligible, and its zone, whose change syncs
// every Service again (zone hints). A deleted Node keeps its last zone.
func (p *Proxier) NodeHandler() cache.ResourceEventHandler {
	set := func(obj any, gone bool) {
		obj, gone = unwrapDeleted(obj, gone)
		n, ok := obj.(*corev1.Node)
		if !ok || n.Name != p.node {
			return
		}
		if gone {
			p.status.setNode(nil)
			return
		}
		p.status.setNode(n)
		if p.nodes.record(ZoneOf(n)) {
			p.changed()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { set(o, false) },
		UpdateFunc: func(_, o any) { set(o, false) },
		DeleteFunc: func(o any) { set(o, true) },
	}
}

func (p *Proxier) handler(record func(obj any, gone bool) bool) cache.ResourceEventHandlerFuncs {
	note := func(obj any, gone bool) {
		if !record(obj, gone) {
			return
		}
		_, slice := obj.(*discoveryv1.EndpointSlice)
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			_, slice = t.Obj.(*discoveryv1.EndpointSlice)
		}
		p.metrics.queued(slice, p.services.Len(), p.slices.size())
		p.changed()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { note(o, false) },
		UpdateFunc: func(_, o any) { note(o, false) },
		DeleteFunc: func(o any) { note(o, true) },
	}
}

// Sync applies the changes recorded since the last Sync, and syncs again
// the Services whose last sync failed: each Service touched gets its
// entries translated and written (only what differs), its health check
// server set, and the UDP frontends that lost a backend noted for the
// cleanup that forgets their flows after the sync (udpclean.go; Loop runs
// it, CleanUDP for a caller without Loop). The first Sync, once the
// informers listed everything, also deletes the entries no Service claims
// and notes every UDP frontend (a restarted proxy's maps). Changes counts
// the entries written.
func (p *Proxier) Sync() (svcsync.Changes, error) {
	p.status.syncing()
	touched := map[string]bool{}
	if zone, ok := p.nodes.take(); ok && zone != p.zone {
		p.logf("node %s: zone %q (was %q): every Service synced again", p.node, zone, p.zone)
		p.zone = zone
		for key := range p.svcs {
			touched[key] = true
		}
	}
	for key, svc := range p.services.Take() {
		touched[key] = true
		if svc == nil {
			delete(p.svcs, key)
		} else {
			p.svcs[key] = svc
		}
	}
	for key, byName := range p.slices.take() {
		touched[key] = true
		if p.eps[key] == nil {
			p.eps[key] = map[string]*discoveryv1.EndpointSlice{}
		}
		for name, es := range byName {
			if es == nil {
				delete(p.eps[key], name)
			} else {
				p.eps[key][name] = es
			}
		}
		if len(p.eps[key]) == 0 {
			delete(p.eps, key)
		}
	}
	maps.Copy(touched, p.failed)
	clear(p.failed)

	var total svcsync.Changes
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(touched)) {
		t0 := time.Now()
		ch, err := p.syncService(key)
		total.Add(ch)
		if err != nil {
			p.failed[key] = true
			errs = append(errs, err)
			p.logf("service %s: %v (retrying)", key, err)
		}
		if p.primed && ch.Total() > 0 {
			p.logf("service %s: +%d ~%d -%d in %s", key, ch.Added, ch.Updated, ch.Deleted, time.Since(t0).Round(time.Microsecond))
		}
	}
	if !p.primed {
		pruned, err := p.syncer.Prune()
		total.Add(pruned)
		if err != nil {
			errs = append(errs, err)
			p.logf("prune: %v", err)
		}
		p.clean.mu.Lock()
		for _, fes := range p.udp {
			p.clean.request(slices.Collect(maps.Keys(fes))...)
		}
		p.clean.mu.Unlock()
		p.primed = true
	}
	p.clean.wake()
	if len(errs) == 0 {
		p.status.updated()
	}
	return total, errors.Join(errs...)
}

// SyncMeasured is Sync observed by the proxier's metrics (Instrument):
// its duration, and the network programming latency of the EndpointSlice
// changes it applied. Their trigger times are taken before Sync takes the
// changes, so a change recorded in between is counted at the next Sync,
// never as applied before it was.
func (p *Proxier) SyncMeasured() (svcsync.Changes, error) {
	triggers := p.slices.takeTriggers()
	full, t0 := !p.primed, time.Now()
	ch, err := p.Sync()
	if err != nil {
		p.slices.putTriggers(triggers)
	}
	p.metrics.synced(t0, full, triggers, err, p.services.Len(), p.slices.size())
	return ch, err
}

// syncService syncs one Service (gone from svcs: deleted) and notes for
// the cleanup the UDP frontends that lost a backend. The cleanup's lock is
// held while the entries are written and its frontends updated
// (udpCleaner: a cleanup never deletes a flow to a backend written since
// its walk began).
func (p *Proxier) syncService(key string) (svcsync.Changes, error) {
	svc := p.svcs[key]
	if svc == nil {
		herr := p.health.Set(key, 0, 0)
		p.clean.mu.Lock()
		ch, err := p.syncer.Sync(key, nil)
		p.clean.written(p.udp[key], nil, err == nil)
		p.clean.mu.Unlock()
		if err == nil {
			delete(p.udp, key) // its entries are gone: its flows are no longer translated
		}
		return ch, errors.Join(err, herr)
	}
	eps := slices.Collect(maps.Values(p.eps[key]))
	slices.SortFunc(eps, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	at := Node{Name: p.node, Zone: p.zone}
	want, notes := Translate(svc, eps, at)
	ext, extNotes := TranslateExternal(svc, eps, at, p.nodeIPs)
	for _, n := range append(notes, extNotes...) {
		p.logf("service %s: %s", key, n)
	}
	if len(ext) > 0 && want == nil {
		want = svcsync.Entries{}
	}
	maps.Copy(want, ext)
	now := UDPFrontends(svc, eps, p.nodeIPs)
	p.clean.mu.Lock()
	ch, err := p.syncer.SyncPorts(key, want, SessionAffinity(svc), AffinityPorts(svc, p.nodeIPs))
	p.clean.written(p.udp[key], now, err == nil)
	if err == nil {
		for fe, had := range p.udp[key] {
			if bs, ok := now[fe]; ok && lost(had, bs) {
				p.clean.request(fe)
			}
		}
	}
	p.clean.mu.Unlock()
	if err == nil {
		p.udp[key] = now
	}
	port, local := HealthCheck(svc, eps, p.node)
	herr := p.health.Set(key, port, local)
	return ch, errors.Join(err, herr)
}

// lost says whether a backend of had is not in now (both sorted).
func lost(had, now []tcbpf.Backend) bool {
	for _, b := range had {
		if _, found := slices.BinarySearchFunc(now, b, tcbpf.CompareBackends); !found {
			return true
		}
	}
	return false
}

// CleanUDP forgets now, in the caller's goroutine, the stale UDP flows the
// syncs so far noted (what Loop's cleanup goroutine does after them).
func (p *Proxier) CleanUDP() error { return p.clean.clean() }

// Loop syncs whenever a change is recorded, until ctx ends. A failed sync
// is retried after a backoff (resync.MinRetry doubling to MaxRetry), sooner
// if another change comes. Beside it a goroutine forgets the stale UDP
// flows the syncs noted (udpCleaner.run).
func (p *Proxier) Loop(ctx context.Context) {
	go p.clean.run(ctx)
	p.clean.wake() // what the syncs before Loop noted
	// Services failed in the sync before Loop: it retries them after a backoff.
	p.kick.Loop(ctx, len(p.failed) > 0, func() error {
		_, err := p.SyncMeasured()
		return err
	}, nil)
}

// Len is the number of entries installed.
func (p *Proxier) Len() int { return p.syncer.Len() }

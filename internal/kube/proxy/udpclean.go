package proxy

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/kube/resync"
)

// udpCleaner forgets, after the syncs, the UDP flows whose backend left
// their frontend (FlowCleaner: a walk of the NodePort conntrack maps, up to
// 131,072 entries each, and of the connected UDP sockets of the node's
// pods).
//
// Why not in the sync: the write of a Service's backends is what makes a
// removal live. The pods' own flows leave a removed backend at their next
// datagram without any walk (from_pod checks an established UDP flow's
// backend, bpf/lb_pod_fam.h), so their conntrack is not walked at all
// (tcbpf.Plane.ForgetUDPFlows); the walk is what remains for the flows
// from outside the node and the connected sockets. Inside the
// sync it made every removal wait for it (removal p50 34.9 ms
// against ~17 ms for an addition; the walk 0.12 s p50, 0.77 s max per
// node, more on a busy CPU). So the sync only notes the frontends that lost
// a backend (request) and one goroutine (run) forgets their flows after
// it, coalescing the requests that came meanwhile into one walk.
//
// The race, and why it cannot delete a live flow: a walk takes a while, a
// later sync may give a frontend back the backend that left (or a new one)
// while it runs, and a new flow to it must not be deleted. So
//   - what a walk keeps is read when it starts, from frontends: the
//     backends each frontend has as the maps hold them, not as the sync
//     that asked saw them;
//   - mu is held by a sync while it writes a Service's entries and
//     updates frontends, and by the cleanup while it deletes a batch of
//     the flows its walk found (tcbpf.FlowGuard); under it, a flow whose
//     frontend has its backend again is left out. A sync thus waits at most
//     for one batch's delete (256 entries), never for a walk.
//
// What is left: an entry the walk found stale that from_pod rewrote to a
// live backend before the delete goes with the batch; the flow's next
// datagram picks again, the same backend by its hash (or its affinity).
type udpCleaner struct {
	flows FlowCleaner // nil: nothing to clean
	logf  func(string, ...any)
	kick  resync.Kick

	mu        sync.Mutex
	frontends map[netip.AddrPort][]tcbpf.Backend // every UDP frontend's backends, as the maps hold them (mu)
	pending   map[netip.AddrPort]bool            // frontends whose stale flows are still to be forgotten (mu)
}

func newUDPCleaner(flows FlowCleaner, logf func(string, ...any)) *udpCleaner {
	return &udpCleaner{flows: flows, logf: logf, kick: resync.NewKick(),
		frontends: map[netip.AddrPort][]tcbpf.Backend{}, pending: map[netip.AddrPort]bool{}}
}

// Lock, Unlock and Backends make the cleaner the walk's tcbpf.FlowGuard.
func (c *udpCleaner) Lock()   { c.mu.Lock() }
func (c *udpCleaner) Unlock() { c.mu.Unlock() }

func (c *udpCleaner) Backends(fe netip.AddrPort) ([]tcbpf.Backend, bool) {
	bs, ok := c.frontends[fe]
	return bs, ok
}

// written records, under mu, a Service's UDP frontends after its write:
// had before, now after (nil: the Service is gone). When the write failed
// the maps may hold either, so each frontend keeps both sets' backends.
func (c *udpCleaner) written(had, now map[netip.AddrPort][]tcbpf.Backend, ok bool) {
	if !ok {
		for fe, bs := range now {
			c.frontends[fe] = union(c.frontends[fe], bs)
		}
		return
	}
	for fe := range had {
		if _, still := now[fe]; !still {
			delete(c.frontends, fe)
		}
	}
	maps.Copy(c.frontends, now)
}

// union is a and b's backends, sorted, once each.
func union(a, b []tcbpf.Backend) []tcbpf.Backend {
	out := slices.Concat(a, b)
	slices.SortFunc(out, tcbpf.CompareBackends)
	return slices.Compact(out)
}

// request notes, under mu, frontends whose flows to a backend they lost are
// to be forgotten; wake has run do it.
func (c *udpCleaner) request(fes ...netip.AddrPort) {
	for _, fe := range fes {
		c.pending[fe] = true
	}
}

// wake has run start a cleanup of what was requested (one is enough for
// any number of requests).
func (c *udpCleaner) wake() {
	if c.flows == nil {
		return
	}
	c.mu.Lock()
	n := len(c.pending)
	c.mu.Unlock()
	if n == 0 {
		return
	}
	c.kick.Now()
}

// run cleans whenever woken, until ctx ends; a failed cleanup is tried
// again after a backoff (its frontends stay requested).
func (c *udpCleaner) run(ctx context.Context) { c.kick.Loop(ctx, false, c.clean, nil) }

// clean forgets the stale flows of the frontends requested so far, keeping
// what each has now (a frontend gone since keeps nothing to forget: its
// flows are no longer translated).
func (c *udpCleaner) clean() error {
	if c.flows == nil {
		return nil
	}
	c.mu.Lock()
	keep := map[netip.AddrPort][]tcbpf.Backend{}
	for fe := range c.pending {
		if bs, ok := c.frontends[fe]; ok {
			keep[fe] = slices.Clone(bs)
		}
	}
	clear(c.pending)
	c.mu.Unlock()
	if len(keep) == 0 {
		return nil
	}
	t0 := time.Now()
	n, err := c.flows.ForgetUDPFlows(keep, c)
	if n > 0 {
		c.logf("forgot %d UDP flows whose backend left their Service in %s (after the sync)", n, time.Since(t0).Round(time.Microsecond))
	}
	if err != nil {
		c.logf("forget stale UDP flows: %v (retrying)", err)
		c.mu.Lock()
		for fe := range keep {
			c.pending[fe] = true
		}
		c.mu.Unlock()
	}
	return err
}

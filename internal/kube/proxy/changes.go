package proxy

import (
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// The change trackers: the informers' handlers only record what changed
// (the last state of each object, nil when it went), and Proxier.Sync
// takes the records and applies them, as kube-proxy's Service and
// endpoints change trackers do. Many changes of one object between two
// syncs cost one sync. Services are recorded by a resync.Changes; the
// EndpointSlices and the Node here.

// sliceChanges records EndpointSlices by their Service (namespace/name,
// from the kubernetes.io/service-name label), then by slice name, and the
// trigger times of the changes (metrics.go: network programming latency),
// by Service: a deleted slice's Service forgets its own, as kube-proxy's
// tracker does.
type sliceChanges struct {
	mu       sync.Mutex
	pending  map[string]map[string]*discoveryv1.EndpointSlice // nil: deleted
	since    time.Time                                        // trigger times before it are not counted
	triggers map[string][]trigger
}

func (c *sliceChanges) record(obj any, gone bool) bool {
	obj, gone = unwrapDeleted(obj, gone)
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return false
	}
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return false // not a Service's (kube-proxy ignores them too)
	}
	key := es.Namespace + "/" + name
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[string]map[string]*discoveryv1.EndpointSlice{}
	}
	if c.pending[key] == nil {
		c.pending[key] = map[string]*discoveryv1.EndpointSlice{}
	}
	if gone {
		c.pending[key][es.Name] = nil
		delete(c.triggers, key)
	} else {
		c.pending[key][es.Name] = es
		if t, ok := triggerOf(es, c.since); ok {
			if c.triggers == nil {
				c.triggers = map[string][]trigger{}
			}
			c.triggers[key] = append(c.triggers[key], t)
		}
	}
	return true
}

// size is the number of slices with a change pending.
func (c *sliceChanges) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, byName := range c.pending {
		n += len(byName)
	}
	return n
}

// takeTriggers returns the trigger times recorded and forgets them.
func (c *sliceChanges) takeTriggers() []trigger {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []trigger
	for _, ts := range c.triggers {
		out = append(out, ts...)
	}
	c.triggers = nil
	return out
}

// putTriggers gives back trigger times a failed sync did not apply (kept
// under "", as their Service is no longer needed).
func (c *sliceChanges) putTriggers(ts []trigger) {
	if len(ts) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.triggers == nil {
		c.triggers = map[string][]trigger{}
	}
	c.triggers[""] = append(c.triggers[""], ts...)
}

func (c *sliceChanges) take() map[string]map[string]*discoveryv1.EndpointSlice {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = nil
	return p
}

// nodeChanges records the zone of the proxy's own Node (its
// topology.kubernetes.io/zone label) when it changes.
type nodeChanges struct {
	mu      sync.Mutex
	last    string  // the zone recorded last
	pending *string // a changed zone not yet taken
}

// record notes the Node's zone; false when it did not change.
func (c *nodeChanges) record(zone string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if zone == c.last {
		return false
	}
	c.last, c.pending = zone, &zone
	return true
}

// take returns a changed zone (false: none since the last take).
func (c *nodeChanges) take() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	z := c.pending
	c.pending = nil
	if z == nil {
		return "", false
	}
	return *z, true
}

// unwrapDeleted takes the object out of an informer's tombstone (a delete
// whose final state the watch missed): it is gone.
func unwrapDeleted(obj any, gone bool) (any, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj, true
	}
	return obj, gone
}

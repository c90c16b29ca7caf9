package proxy

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// The change trackers: the informers' handlers only record what changed
// (the last state of each object, nil when it went), and Proxier.Sync
// takes the records and applies them, as kube-proxy's Service and
// endpoints change trackers do. Many changes of one object between two
// syncs cost one sync.

// serviceChanges records Services by namespace/name.
type serviceChanges struct {
	mu      sync.Mutex
	pending map[string]*corev1.Service // nil: deleted
}

func (c *serviceChanges) record(obj any, gone bool) string {
	obj, gone = unwrapDeleted(obj, gone)
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return ""
	}
	key := svc.Namespace + "/" + svc.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[string]*corev1.Service{}
	}
	if gone {
		svc = nil
	}
	c.pending[key] = svc
	return key
}

// take returns the records and forgets them.
func (c *serviceChanges) take() map[string]*corev1.Service {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = nil
	return p
}

// sliceChanges records EndpointSlices by their Service (namespace/name,
// from the kubernetes.io/service-name label), then by slice name.
type sliceChanges struct {
	mu      sync.Mutex
	pending map[string]map[string]*discoveryv1.EndpointSlice // nil: deleted
}

func (c *sliceChanges) record(obj any, gone bool) string {
	obj, gone = unwrapDeleted(obj, gone)
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return ""
	}
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return "" // not a Service's (kube-proxy ignores them too)
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
	} else {
		c.pending[key][es.Name] = es
	}
	return key
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

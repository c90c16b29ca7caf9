package netpolicy

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// changes is a change tracker, as the Service proxy's (internal/kube/proxy
// changes.go): the informers' handlers record the last state of each object
// by key (nil: it went), and Controller.Sync takes the records and applies
// them. Many changes of one object between two syncs cost one sync.
type changes[T any] struct {
	mu      sync.Mutex
	pending map[string]*T
}

// record notes obj's last state (gone: deleted) under its key.
func (c *changes[T]) record(obj any, gone bool) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, gone = t.Obj, true
	}
	o, ok := obj.(*T)
	if !ok {
		return false
	}
	key, err := cache.MetaNamespaceKeyFunc(o)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		c.pending = map[string]*T{}
	}
	if gone {
		o = nil
	}
	c.pending[key] = o
	return true
}

// take returns the records and forgets them.
func (c *changes[T]) take() map[string]*T {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = nil
	return p
}

// apply puts the records into have (a nil record deletes); it says whether
// there was any.
func apply[T any](have map[string]*T, took map[string]*T) bool {
	for k, o := range took {
		if o == nil {
			delete(have, k)
		} else {
			have[k] = o
		}
	}
	return len(took) > 0
}

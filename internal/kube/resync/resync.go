// Package resync is what a node's controllers share, the Service proxy
// (internal/kube/proxy) and the NetworkPolicy controller
// (internal/kube/netpolicy), as kube-proxy's change trackers and its
// runner: the informers' handlers only record what changed (Changes) and
// kick a loop (Kick.Loop) that syncs, retrying a failed sync after a
// backoff. Many changes between two syncs cost one sync.
package resync

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// Changes records objects of type T by namespace/name: the last state of
// each, nil when it went.
type Changes[T any] struct {
	mu      sync.Mutex
	pending map[string]*T
}

// Record notes obj's last state (gone: deleted, as is an informer's
// tombstone) under its key; false when obj is no T.
func (c *Changes[T]) Record(obj any, gone bool) bool {
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

// Len is the number of objects with a change recorded.
func (c *Changes[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// Take returns the records and forgets them.
func (c *Changes[T]) Take() map[string]*T {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = nil
	return p
}

// Retry bounds of a failed sync (doubling in between).
const (
	MinRetry = 100 * time.Millisecond
	MaxRetry = 30 * time.Second
)

// Kick wakes a Loop: any number of kicks before it syncs cost one sync.
type Kick chan struct{}

// NewKick is a Kick for one Loop.
func NewKick() Kick { return make(Kick, 1) }

// Now wakes the Loop (without waiting for it).
func (k Kick) Now() {
	select {
	case k <- struct{}{}:
	default:
	}
}

// Loop calls sync whenever k is kicked, until ctx ends. A failed sync is
// tried again after a backoff (MinRetry doubling to MaxRetry), sooner if
// k is kicked meanwhile; retry says the sync before Loop failed, so the
// first comes after MinRetry. failed (nil: none) hears of each failure and
// how long until its retry.
func (k Kick) Loop(ctx context.Context, retry bool, sync func() error, failed func(err error, in time.Duration)) {
	var backoff time.Duration
	var again <-chan time.Time
	if retry {
		backoff = MinRetry
		again = time.After(backoff)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-k:
		case <-again:
		}
		again = nil
		if err := sync(); err != nil {
			backoff = min(max(2*backoff, MinRetry), MaxRetry)
			again = time.After(backoff)
			if failed != nil {
				failed(err, backoff)
			}
			continue
		}
		backoff = 0
	}
}

package resync

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Changes keeps each object's last state by namespace/name, nil for one
// deleted (also through a tombstone), ignores other types, and Take
// empties it.
func TestChanges(t *testing.T) {
	var c Changes[corev1.Pod]
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	if !c.Record(pod("a", "n1"), false) || !c.Record(pod("a", "n2"), false) || !c.Record(pod("b", ""), false) {
		t.Fatal("a pod was not recorded")
	}
	if c.Record(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}, false) {
		t.Error("a Service was recorded by a Pod tracker")
	}
	if !c.Record(cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: pod("b", "")}, false) {
		t.Error("a tombstone was not recorded")
	}
	if c.Len() != 2 {
		t.Errorf("Len = %d, want 2", c.Len())
	}
	got := c.Take()
	if len(got) != 2 || got["ns/a"] == nil || got["ns/a"].Spec.NodeName != "n2" || got["ns/b"] != nil {
		t.Errorf("Take = %v: want ns/a's last state and ns/b deleted", got)
	}
	if c.Len() != 0 || c.Take() != nil {
		t.Error("Take left records")
	}
}

// Loop syncs once for kicks that came together, retries a failed sync
// without a kick, retries first when told the sync before it failed, and
// returns when its context ends.
func TestKickLoop(t *testing.T) {
	k := NewKick()
	var syncs, fail atomic.Int32
	synced := make(chan struct{}, 16)
	var failures []time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Loop(ctx, true, func() error {
			syncs.Add(1)
			defer func() { synced <- struct{}{} }()
			if fail.Load() > 0 {
				fail.Add(-1)
				return errors.New("failed")
			}
			return nil
		}, func(_ error, in time.Duration) { failures = append(failures, in) })
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-synced:
		case <-time.After(5 * time.Second):
			t.Fatalf("no sync: %s", what)
		}
	}
	wait("retry of the sync before Loop")
	fail.Store(2)
	k.Now()
	k.Now()
	k.Now()
	wait("kicked")
	wait("first retry")
	wait("second retry")
	select {
	case <-synced:
		t.Fatal("a sync more than the kicks and retries asked for")
	case <-time.After(3 * MinRetry):
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Loop did not return when its context ended")
	}
	if syncs.Load() != 4 || len(failures) != 2 || failures[0] != MinRetry || failures[1] != 2*MinRetry {
		t.Errorf("%d syncs, failures retried after %v; want 4 syncs, retries after %v and %v", syncs.Load(), failures, MinRetry, 2*MinRetry)
	}
}

package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// waitSlice takes the first event after the write that shows the wanted
// state (not an older one, not the other state), counts a change whose
// event never came as not applied, and ends the share with an error when
// the watch failed or ended: a watch that stopped must not read as 40
// changes "not applied" (a watch the API server ended at once,
// "Too large resource version", on a cluster whose etcd is 3.4.23).
func TestWaitSlice(t *testing.T) {
	ctx := context.Background()
	at := time.Now()
	seen := make(chan sliceSeen, 4)
	seen <- sliceSeen{at: at.Add(-time.Millisecond), in: true} // before the write
	seen <- sliceSeen{at: at.Add(time.Millisecond), in: false} // the other state
	seen <- sliceSeen{at: at.Add(3 * time.Millisecond), in: true}
	d, ok, err := waitSlice(ctx, seen, at, true, 10*time.Second)
	if err != nil || !ok || d != 3*time.Millisecond {
		t.Errorf("got %v, %v, %v; want 3ms, applied", d, ok, err)
	}

	if _, ok, err := waitSlice(ctx, seen, at, true, 50*time.Millisecond); ok || err != nil {
		t.Errorf("no event: got applied %v, %v; want not applied, no error", ok, err)
	}

	seen <- sliceSeen{err: errors.New("Timeout: Too large resource version: 2878, current: 2827")}
	if _, _, err := waitSlice(ctx, seen, at, true, 10*time.Second); err == nil || !strings.Contains(err.Error(), "Too large resource version") {
		t.Errorf("a failed watch: %v", err)
	}

	close(seen)
	start := time.Now()
	if _, _, err := waitSlice(ctx, seen, at, true, 10*time.Second); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Errorf("an ended watch: %v", err)
	} else if time.Since(start) > 5*time.Second {
		t.Errorf("an ended watch was noticed only after %v", time.Since(start))
	}
}

package testnet

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// UpLab brings up a lab for a test, with pods default pods (pod-a, pod-b,
// ... from lab.DefaultPodCIDR), or spec's own Pods when it names them, and
// spec's name, mode and options, and takes
// it down when the test ends, pass or fail; a lab of that name left by a
// run killed halfway is removed first. Without root the test is skipped.
// down is that teardown (idempotent), for a test that removes the lab
// itself; the lab's lock is held until then (Release it to let the CLI or
// a provider's Apply take it).
func UpLab(t *testing.T, spec lab.Spec, pods int) (l *lab.Lab, down func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (namespaces)")
	}
	if spec.Pods == nil {
		ps, err := lab.DefaultPodSpecs(pods, lab.DefaultPodCIDR, 1)
		if spec.Family.HasIPv6() { // pods with IPv6 addresses (and IPv4 ones in a dual lab)
			ps, err = lab.PodsFor(pods, spec)
		}
		if err != nil {
			t.Fatal(err)
		}
		spec.Pods = ps
	}
	_ = lab.Down(spec.Name, nil)
	l, err := lab.Up(context.Background(), spec, nil)
	if err != nil {
		t.Fatalf("up %s (mode %s): %v", spec.Name, spec.Mode, err)
	}
	var once sync.Once
	down = func() {
		once.Do(func() {
			l.Release()
			if err := lab.Down(spec.Name, nil); err != nil {
				t.Errorf("down %s: %v", spec.Name, err)
			}
		})
	}
	t.Cleanup(down)
	return l, down
}

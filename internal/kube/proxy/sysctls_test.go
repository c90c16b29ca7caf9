package proxy

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// The proxy sets kube-proxy's CLOSE_WAIT timeout in the node's namespace,
// once, and never in the root namespace, which keeps its own value.
func TestConntrackSysctls(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace of its own needs root")
	}
	rootBefore, err := nsutil.CurrentSysctl(closeWaitSysctl)
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("proxyct%d", os.Getpid())
	if err := nsutil.Create(ns, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsutil.Delete(ns) })
	var said []string
	logf := func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }

	if err := setConntrackSysctls(nsutil.Path(ns), DefaultTCPCloseWaitTimeout, logf); err != nil {
		t.Fatal(err)
	}
	if got, err := nsutil.ReadSysctl(ns, closeWaitSysctl); got != "3600" || err != nil {
		t.Errorf("the node's %s = %q, %v; want 3600", closeWaitSysctl, got, err)
	}
	if len(said) != 1 || !strings.Contains(said[0], "-> 3600") {
		t.Errorf("said %q, want the change once", said)
	}
	// Written only when it differs, as kube-proxy's.
	if err := setConntrackSysctls(nsutil.Path(ns), time.Hour, logf); err != nil || len(said) != 1 {
		t.Errorf("the same value again: %v, said %q", err, said)
	}
	// 0 leaves it.
	if err := setConntrackSysctls(nsutil.Path(ns), 0, logf); err != nil || len(said) != 1 {
		t.Errorf("0: %v, said %q", err, said)
	}
	// The root namespace is refused, before anything is written.
	if err := setConntrackSysctls("/proc/self/ns/net", 2*time.Hour, logf); err == nil || !strings.Contains(err.Error(), "root network namespace") {
		t.Errorf("the root namespace: %v, want a refusal", err)
	}
	// Without a readable reference to the root namespace, nothing is
	// written, and the log says why.
	refs := rootNetNS
	rootNetNS = []string{"/proc/nonexistent/ns/net"}
	err = setConntrackSysctls(nsutil.Path(ns), 2*time.Hour, logf)
	rootNetNS = refs
	if got, _ := nsutil.ReadSysctl(ns, closeWaitSysctl); err != nil || got != "3600" || !strings.Contains(said[len(said)-1], "cannot be told apart") {
		t.Errorf("no root reference: %v, the node's value %s, said %q; want it left, and why", err, got, said)
	}
	if after, err := nsutil.CurrentSysctl(closeWaitSysctl); after != rootBefore || err != nil {
		t.Errorf("the root namespace's %s went %s -> %s (%v)", closeWaitSysctl, rootBefore, after, err)
	}
}

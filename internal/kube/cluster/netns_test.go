package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/rootns"
)

// A 1-node cluster beside iproute2: `ip netns add` before kube
// up, `ip netns add`/`del` while it runs; kube down leaves nothing of it
// (no entry, no `ip netns list` line, no mount, also beneath a later mount
// of /run/netns), iproute2's namespace keeps working, and the root
// namespace is as it was. e2e's TestNetnsLayouts plays the starting states
// of /run/netns with labs.
func TestKubeBesideIproute2(t *testing.T) {
	needCluster(t)
	const name = "vkn"
	first, during := fmt.Sprintf("kprobe%d", os.Getpid()), fmt.Sprintf("kprobe%db", os.Getpid())
	for _, p := range []string{first, during} {
		t.Cleanup(func() {
			if _, err := os.Lstat(nsutil.Path(p)); err == nil {
				testnet.IPNetns(t, "del", p)
			}
		})
	}
	// The package's cluster runs meanwhile, and a cluster's down restores
	// the kubelet sysctls the machine had before any cluster (nodes.go):
	// not this test's to compare (Leftovers(st, nil) skips them too).
	snapshot := func() map[string]string {
		s := rootns.Snapshot()
		delete(s, "kubelet-sysctls")
		return s
	}
	before := snapshot()
	testnet.IPNetns(t, "add", first)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	st, err := Up(ctx, Spec{Name: name, Nodes: 1, Proxy: "iptables"}, t.Logf)
	if err != nil {
		if _, serr := os.Stat(lab.Dir(name)); serr == nil {
			_ = Down(name, nil)
		}
		t.Fatal(err)
	}
	testnet.IPNetns(t, "add", during)
	testnet.IPNetns(t, "del", during)
	if err := Down(name, nil); err != nil {
		t.Errorf("kube down: %v", err)
	}
	if msg := Leftovers(st, nil); msg != "" {
		t.Errorf("kube down left: %s", msg)
	}
	if out := testnet.IPNetns(t, "list"); strings.Contains(out, lab.NSName(name, "")) {
		t.Errorf("ip netns list still shows the cluster:\n%s", out)
	}
	testnet.IPNetns(t, "exec", first, "true")
	testnet.IPNetns(t, "del", first)
	if d := rootns.Diff(before, snapshot()); d != "" {
		t.Errorf("the root namespace changed:\n%s", d)
	}
}

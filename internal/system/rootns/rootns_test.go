package rootns

import (
	"strings"
	"testing"
)

func TestDiffSeesChanges(t *testing.T) {
	a := map[string]string{"routes": "default via 10.0.0.1\n", "sysctl": "net.ipv4.ip_forward = 0"}
	if d := Diff(a, a); d != "" {
		t.Errorf("identical snapshots differ: %s", d)
	}
	b := map[string]string{"routes": "default via 10.0.0.1\n", "sysctl": "net.ipv4.ip_forward = 1"}
	if d := Diff(a, b); !strings.Contains(d, "sysctl") {
		t.Errorf("a changed sysctl is not reported: %q", d)
	}
}

// A stale namespace that a clean removed is no change; a new one is a leak.
func TestDiffCountsNamespacesThatAppear(t *testing.T) {
	stale := map[string]string{"vnetlab-namespaces": "vnl-old-0-a\nvnl-old-0-b", "vnetlab-namespace-mounts": "/run/netns/vnl-old-0-a (mount 43 on 42)"}
	none := map[string]string{"vnetlab-namespaces": "", "vnetlab-namespace-mounts": ""}
	if d := Diff(stale, none); d != "" {
		t.Errorf("stale namespaces removed are reported as a change: %s", d)
	}
	leak := map[string]string{"vnetlab-namespaces": "vnl-old-0-a\nvnl-new-0-a", "vnetlab-namespace-mounts": ""}
	if d := Diff(stale, leak); !strings.Contains(d, "vnl-new-0-a") || strings.Contains(d, "vnl-old-0-a") {
		t.Errorf("a namespace left behind is not reported alone: %q", d)
	}
}

func TestSnapshotIsStable(t *testing.T) {
	a, b := Snapshot(), Snapshot()
	if d := Diff(a, b); d != "" && !strings.Contains(d, "vnetlab-namespaces") {
		t.Errorf("two snapshots in a row differ (a dynamic value is not filtered):\n%s", d)
	}
}

func TestSnapshotHasKubeletSysctls(t *testing.T) {
	s := Snapshot()["kubelet-sysctls"]
	for _, name := range KubeletSysctls {
		if !strings.Contains(s, name+" = ") {
			t.Errorf("snapshot misses %s: %q", name, s)
		}
	}
}

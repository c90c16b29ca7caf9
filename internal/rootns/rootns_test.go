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

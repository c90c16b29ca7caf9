package knob_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// cc sets the congestion control in every pod's namespace and reads it
// back there, leaving the root namespace's alone: every one the kernel
// has and lets a namespace set (tcp_allowed_congestion_control) is
// applied, cubic, bbr where present; one outside that list is not
// applied, naming the allowed ones; one the kernel lacks, naming the
// available ones.
func TestCCInLab(t *testing.T) {
	p := labPath(t, "kn-cc", vethRouted)
	root := sysctl(t, "tcp_congestion_control")
	avail := strings.Fields(sysctl(t, "tcp_available_congestion_control"))
	allowed := strings.Fields(sysctl(t, "tcp_allowed_congestion_control"))
	if !slices.Contains(avail, "cubic") {
		t.Errorf("cubic is not in this kernel: %v", avail)
	}
	for _, c := range avail {
		asked := knob.Values("").With(knob.CC, c)
		if !slices.Contains(allowed, c) && c != root {
			apply(t, p, asked, knob.CC, "cc "+c+" refused in ")
			continue
		}
		proofs := apply(t, p, asked, knob.CC, "")
		if len(proofs) != len(p.Pods) {
			t.Errorf("cc %s: %d namespaces proven, want the %d pods': %+v", c, len(proofs), len(p.Pods), proofs)
		}
		allGot(t, proofs, c)
	}
	apply(t, p, "cc=nosuchcc", knob.CC, "cc nosuchcc is not available in this kernel (available: "+strings.Join(avail, ", ")+")")
	if got := sysctl(t, "tcp_congestion_control"); got != root {
		t.Errorf("the root namespace's congestion control changed: %s, was %s", got, root)
	}
}

// sysctl reads net.ipv4's name in the test's (root) namespace.
func sysctl(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

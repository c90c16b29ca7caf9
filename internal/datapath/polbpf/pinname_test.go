package polbpf

import (
	"net/url"
	"strings"
	"testing"
)

// A link's pin name has no dot (bpffs refuses one; containerd's namespace
// paths have them) and reads back as the interface it names.
func TestPinNameHasNoDot(t *testing.T) {
	for _, s := range []string{"/run/vnetlab/labs/k/k-node1/containerd/state/io.containerd.grpc.v1.cri/netns/cni-1", "eth0", "pod-a", "a@b.c%2E"} {
		n := pinName(s)
		if strings.ContainsAny(n, "./@") {
			t.Errorf("pinName(%q) = %q: has a dot, a slash or an @", s, n)
		}
		if back, err := url.QueryUnescape(n); err != nil || back != s {
			t.Errorf("pinName(%q) = %q reads back as %q (%v)", s, n, back, err)
		}
	}
}

package runner

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

const familyLabPrefix = "stf" // this file's labs

// runDual runs one 1 s sample of each test on each path of each mode, in
// dual-stack labs, and removes them when the test ends (it skips without
// root, iperf3 or VNETLAB_BIN).
func runDual(t *testing.T, modes, paths []string, tests ...engine.Test) (Spec, *results.File) {
	t.Helper()
	requireLabs(t, familyLabPrefix)
	if os.Getenv("VNETLAB_BIN") == "" {
		t.Skip("the rr engine runs the vnetlab binary: set VNETLAB_BIN")
	}
	spec := DefaultSpec()
	spec.Modes, spec.Paths, spec.Tests = Variants(modes, nil), paths, tests
	spec.Family = family.Dual
	spec.Duration, spec.Repeat = time.Second, 1
	spec.LabPrefix = familyLabPrefix
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f, err := Run(ctx, spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	return spec, f
}

// A dual-stack run measures every test over each family on the same pods:
// iperf3 -6, the rr engine's tcp_rr and tcp_crr over IPv6 as over IPv4,
// in the host (loopback), veth-routed and bridge modes; each cell is named
// by its family (veth-routed/pod/ipv6/tcp_rr) and every sample is valid.
func TestRunDualStack(t *testing.T) {
	spec, f := runDual(t, []string{"host", "veth-routed", "bridge"}, []string{"pod"}, engine.TCPStream, engine.TCPRR, engine.TCPCRR)
	got := map[string]*results.Cell{}
	for _, c := range f.Cells {
		got[c.ID().String()] = c
	}
	for _, m := range []string{"host", "veth-routed", "bridge"} {
		for _, fam := range []string{"", "ipv6/"} {
			for _, test := range spec.Tests {
				name := m + "/pod/" + fam + string(test)
				c, ok := got[name]
				if !ok {
					t.Errorf("no cell %s (have %d cells, skipped %v)", name, len(f.Cells), f.Metadata.Skipped)
					continue
				}
				if c.Valid != 1 || c.Median <= 0 {
					t.Errorf("%s: valid=%d median=%g, samples %+v", name, c.Valid, c.Median, c.Samples)
				}
			}
		}
	}
	if len(f.Cells) != 18 {
		t.Errorf("%d cells, want 18 (3 modes x 2 families x 3 tests)", len(f.Cells))
	}
}

// docker-nat publishes its ports over IPv6 as over IPv4 (ip6tables DNAT
// from ext and hairpin from a container); 127.0.0.1's route_localnet has
// no IPv6 counterpart, so published-local is measured over IPv4 only and
// its IPv6 cell is listed as skipped.
func TestRunDockerNATDualStack(t *testing.T) {
	_, f := runDual(t, []string{"docker-nat"}, []string{"pod", "published", "published-hairpin", "published-local"}, engine.TCPCRR)
	var names []string
	for _, c := range f.Cells {
		names = append(names, c.ID().String())
		if c.Valid != 1 || c.Median <= 0 {
			t.Errorf("%s: valid=%d median=%g, samples %+v", c.ID(), c.Valid, c.Median, c.Samples)
		}
	}
	want := "docker-nat/pod/tcp_crr docker-nat/pod/ipv6/tcp_crr docker-nat/published/tcp_crr docker-nat/published/ipv6/tcp_crr " +
		"docker-nat/published-hairpin/tcp_crr docker-nat/published-hairpin/ipv6/tcp_crr docker-nat/published-local/tcp_crr"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("cells\n%s\nwant\n%s", got, want)
	}
	if len(f.Metadata.Skipped) != 1 || !strings.Contains(f.Metadata.Skipped[0].Reason, "path published-local of mode docker-nat has no ipv6 address") {
		t.Errorf("skipped: %+v", f.Metadata.Skipped)
	}
}

// Services over IPv6 of a provider without IPv6
// (ebpf has it) are refused by Validate,
// before any lab is built, with one line naming the fix.
func TestRunRefusesFamily(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: probes the kernel's features")
	}
	spec := DefaultSpec()
	spec.Family = family.IPv6
	// Every mode has IPv6 (netkit-ebpf's is proven under qemu); lab.Spec's
	// test refuses a mode without it.
	spec.Modes = Variants([]string{"veth-routed"}, nil)
	if err := spec.Validate(); err != nil {
		t.Errorf("veth-routed over IPv6: %v", err)
	}
	spec.Paths = []string{"pod", ServicePath}
	for _, f := range []family.Family{family.IPv6, family.Dual} {
		spec.Family = f
		spec.Providers = []string{"iptables", "ebpf-sock"}
		if err := spec.Validate(); err != nil {
			t.Errorf("service path over %s with iptables and ebpf-sock: %v", f, err)
		}
		spec.Providers = []string{"iptables", "nftables"}
		if err := spec.Validate(); err != nil {
			t.Errorf("service path over %s with iptables and nftables: %v", f, err)
		}
		spec.Providers = []string{"ebpf"}
		if err := spec.Validate(); err != nil {
			t.Errorf("service path over %s with ebpf: %v", f, err)
		}
		spec.Providers = nil
	}
	spec.Providers = nil
	spec.Family, spec.PodCIDR6 = family.IPv4, "fd00:1::/64"
	if err := spec.Validate(); err == nil || !strings.Contains(err.Error(), "--pod-cidr6 fd00:1::/64 is for IPv6 pods") {
		t.Errorf("pod_cidr6 in an IPv4 run: %v", err)
	}
	states, _ := lab.List()
	for _, st := range states {
		if strings.HasPrefix(st.Name, "run") {
			t.Errorf("a refused run left lab %s", st.Name)
		}
	}
}

package conformance

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// smokeCluster is the smoke test's cluster name (kube up's tests use others).
const smokeCluster = "vconf"

func needRoot(t *testing.T) {
	t.Helper()
	switch {
	case os.Geteuid() != 0:
		t.Skip("a conformance run brings up a local cluster: it needs root")
	case os.Getenv("VNETLAB_BIN") == "":
		t.Skip("a local cluster runs `vnetlab kube forward` and puts vnetlab in its image: set VNETLAB_BIN to a built vnetlab (make test does)")
	}
}

// A focus that selects no spec is refused before any cluster is made (the
// first call builds e2e.test: about 10 minutes once Kubernetes is built).
func TestRefusesFocusMatchingNothing(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	_, err := Run(ctx, Spec{Focus: `no spec is named like this`, Cluster: cluster.Spec{Name: smokeCluster}, ReportDir: t.TempDir()}, t.Logf)
	if err == nil || !strings.Contains(err.Error(), "selects none of e2e.test's") {
		t.Fatalf("Run with a focus matching nothing: %v, want a refusal", err)
	}
	if _, err := cluster.Load(smokeCluster); err == nil {
		t.Errorf("cluster %s exists after a refused run", smokeCluster)
	}
}

// The dual suite's skip leaves out of its focus only the specs the docs say
// (SCTP, Slow), and its focus selects both the IPv6DualStack specs and the
// granular checks, which run on each family (e2e.test's dry run: no
// cluster).
func TestDualSuiteSelection(t *testing.T) {
	selected, focused := selection(t, Spec{Suite: Dual, Cluster: cluster.Spec{Proxy: clusternet.IPTables}})
	t.Logf("the dual suite selects %d of %d specs its focus matches", selected.WillRun, focused.WillRun)
	dualStack, granular := 0, 0
	for _, name := range selected.Ran {
		if strings.Contains(name, "[Feature:IPv6DualStack]") {
			dualStack++
		}
		if strings.Contains(name, "Granular Checks") {
			granular++
		}
	}
	if dualStack == 0 || granular == 0 {
		t.Errorf("the dual suite selects %d IPv6DualStack and %d granular specs, want both", dualStack, granular)
	}
	documented := regexp.MustCompile(`\[Slow\]|SCTP`)
	for _, name := range focused.Ran {
		if !slices.Contains(selected.Ran, name) && !documented.MatchString(name) {
			t.Errorf("the dual suite skips %q, which docs/conformance.md does not list", name)
		}
	}
}

// The netpol suite keeps upstream's [Feature:NetworkPolicy] specs (46 of
// them in v1.37.2, TCP and UDP) and the 2 API specs, and leaves out of its
// focus only the SCTP connectivity specs (e2e.test's dry run: no cluster).
func TestNetpolSuiteSelection(t *testing.T) {
	selected, focused := selection(t, Spec{Suite: Netpol})
	feature := 0
	for _, name := range selected.Ran {
		if strings.Contains(name, "[Feature:NetworkPolicy]") {
			feature++
		}
	}
	t.Logf("the netpol suite selects %d of the %d specs its focus matches, %d of them [Feature:NetworkPolicy]", selected.WillRun, focused.WillRun, feature)
	if feature < 40 || selected.WillRun-feature < 2 {
		t.Errorf("the netpol suite selects %d [Feature:NetworkPolicy] specs and %d others, want them all (46 and 2 in v1.37.2)", feature, selected.WillRun-feature)
	}
	for _, name := range focused.Ran {
		if !slices.Contains(selected.Ran, name) && !strings.Contains(name, "[Feature:SCTPConnectivity]") {
			t.Errorf("the netpol suite skips %q, which is no SCTP connectivity spec", name)
		}
	}
}

// selection is what e2e.test's dry run selects with spec's suite (its
// focus and skip), and with its focus alone.
func selection(t *testing.T, spec Spec) (selected, focused Outcome) {
	t.Helper()
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	e2eBin, err := binaries.EnsureE2E(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if spec, err = spec.Resolve(); err != nil {
		t.Fatal(err)
	}
	e2e := e2eRunner{bin: e2eBin, tmp: t.TempDir()}
	if selected, err = e2e.dryRun(ctx, spec); err != nil {
		t.Fatal(err)
	}
	spec.Skip = ""
	if focused, err = e2e.dryRun(ctx, spec); err != nil {
		t.Fatal(err)
	}
	return selected, focused
}

// TestSmoke runs the smoke suite, upstream's specs of the Service behaviours
// a kube-proxy replacement most easily gets wrong, on a 3-node cluster with
// vnetlab's CNI (veth-ebpf) and eBPF proxy: every spec runs and passes (a
// spec that fails once is rerun; a pass then is logged as flaky), and the
// cluster's removal leaves nothing behind.
func TestSmoke(t *testing.T) {
	smoke(t, Spec{Suite: Smoke, Cluster: cluster.Spec{Name: smokeCluster}}, SmokeSpecs)
}

// TestDualSmoke runs the dual-smoke suite, upstream's dual-stack pod, node
// and Service specs and pod to Service traffic over IPv6, on a 3-node
// dual-stack cluster with vnetlab's CNI (veth-routed) and kube-proxy
// (iptables: vnetlab-ebpf still fails 10 of the dual suite's specs,
// docs/conformance.md): the cluster's dual-stack wiring and the CNI's two
// families, as upstream checks them.
func TestDualSmoke(t *testing.T) {
	smoke(t, Spec{Suite: DualSmoke, Cluster: cluster.Spec{Name: smokeCluster, Proxy: clusternet.IPTables, CNIMode: modes.VethRouted}}, DualSmokeSpecs)
}

// TestNetpolSmoke runs the netpol-smoke suite, upstream's NetworkPolicy
// specs of each kind of peer and port, on a 3-node cluster with vnetlab's
// CNI (veth-routed), its eBPF proxy and its policy controller: the
// controller's rules, as upstream checks them.
func TestNetpolSmoke(t *testing.T) {
	smoke(t, Spec{Suite: NetpolSmoke, Cluster: cluster.Spec{Name: smokeCluster}}, NetpolSmokeSpecs)
}

// smoke runs spec, whose focus selects exactly specs: each runs and passes
// (rerun once if it fails: a pass then is logged as flaky), and the
// cluster's removal leaves nothing behind.
func smoke(t *testing.T, spec Spec, specs []string) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	spec.FlakeAttempts, spec.Timeout, spec.ReportDir = 2, 30*time.Minute, t.TempDir()
	before := cluster.MachineState()
	tmpBefore := kubercDirs(t)
	start := time.Now()
	r, err := Run(ctx, spec, t.Logf)
	if r != nil && r.Cluster != nil {
		if left := cluster.Leftovers(r.Cluster, before); left != "" {
			t.Errorf("the removed cluster left: %s", left)
		}
	}
	if left := slices.DeleteFunc(kubercDirs(t), func(d string) bool { return slices.Contains(tmpBefore, d) }); len(left) > 0 {
		t.Errorf("the run left e2e.test's temporary directories in %s: %v", os.TempDir(), left)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s (%s in all: %v)", strings.Join(r.Summary, "; "), time.Since(start).Round(time.Second), r.Steps)
	if r.WillRun != len(specs) {
		t.Errorf("the %s focus selected %d specs, want %d: has upstream renamed one?", spec.Suite, r.WillRun, len(specs))
	}
	for _, want := range specs {
		ran := false
		for _, name := range r.Ran {
			ran = ran || strings.HasPrefix(name, want)
		}
		if !ran {
			t.Errorf("did not run: %s", want)
		}
	}
	for _, f := range r.Flaky {
		t.Logf("flaky (passed on a rerun): %s", f.Name)
	}
	for _, f := range r.Failed {
		t.Errorf("%s %s after %s: %s: %s", strings.ToUpper(f.State), f.Name, f.RunTime.Round(time.Second), f.Location, f.Message)
	}
}

// kubercDirs are the directories upstream's kubectl kuberc specs make in
// TMPDIR, in every e2e.test process, and never remove.
func kubercDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "test-kuberc*"))
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

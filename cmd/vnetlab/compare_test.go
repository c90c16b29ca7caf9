package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// vnetlabBin is the binary under test: $VNETLAB_BIN (make test sets it), or
// one built here.
func vnetlabBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("VNETLAB_BIN"); b != "" {
		return b
	}
	bin := filepath.Join(t.TempDir(), "vnetlab")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func runVnetlab(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func cellOf(mode, test, unit string, vals ...float64) *results.Cell {
	c := &results.Cell{Mode: mode, Path: "pod", Test: test, Unit: unit, Valid: len(vals), Median: stats.Median(vals)}
	for _, v := range vals {
		s := results.Sample{Valid: true}
		s.Value = v
		c.Samples = append(c.Samples, s)
	}
	return c
}

// predictedFailure is bridge-nf-off's clusterIP cell: the run says it fails.
func predictedFailure() *results.Cell {
	return &results.Cell{Mode: "bridge-nf-off", Path: "service", Provider: "iptables", Test: "tcp_stream", Unit: "Gbit/s",
		Note: "expected to fail: bridge_nf_call_iptables=off", Failed: 1, Samples: []results.Sample{{Error: "iperf3: unable to connect to server"}}}
}

// Two synthetic runs: veth-routed tcp_stream clearly regressed (-20%),
// bridge tcp_rr unchanged but noisy, and a cell failing, as predicted, in both.
func writeCompareFiles(t *testing.T) (oldPath, newPath string) {
	dir := t.TempDir()
	old := &results.File{SchemaVersion: 1, Cells: []*results.Cell{
		cellOf("veth-routed", "tcp_stream", "Gbit/s", 10, 10.1, 9.9, 10.05, 9.95, 10.02, 9.98, 10.03),
		cellOf("bridge", "tcp_rr", "trans/s", 30000, 36000, 28000, 34000, 31000, 37000, 29000, 33000),
		predictedFailure(),
	}}
	new := &results.File{SchemaVersion: 1, Cells: []*results.Cell{
		cellOf("veth-routed", "tcp_stream", "Gbit/s", 8, 8.1, 7.9, 8.05, 7.95, 8.02, 7.98, 8.03),
		cellOf("bridge", "tcp_rr", "trans/s", 32000, 29500, 35500, 30500, 36500, 28500, 33500, 31500),
		predictedFailure(),
	}}
	oldPath, newPath = filepath.Join(dir, "old.json"), filepath.Join(dir, "new.json")
	if err := results.Write(oldPath, old); err != nil {
		t.Fatal(err)
	}
	if err := results.Write(newPath, new); err != nil {
		t.Fatal(err)
	}
	return oldPath, newPath
}

func TestCompareCommand(t *testing.T) {
	bin := vnetlabBin(t)
	oldPath, newPath := writeCompareFiles(t)

	out, errOut, code := runVnetlab(t, bin, "compare", oldPath, newPath)
	if code != 0 {
		t.Fatalf("compare without a gate exited %d: %s", code, errOut)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		for _, k := range []string{"veth-routed|pod||tcp_stream", "bridge|pod||tcp_rr", "bridge-nf-off|service|iptables|tcp_stream"} {
			if strings.Contains(l, k) {
				lines[k] = l
			}
		}
	}
	if l := lines["veth-routed|pod||tcp_stream"]; !strings.Contains(l, "-20.0%") || !strings.Contains(l, "worse") {
		t.Errorf("regressed cell line: %q, want -20.0%% and worse", l)
	}
	if l := lines["bridge|pod||tcp_rr"]; !strings.Contains(l, " ~ ") {
		t.Errorf("noisy unchanged cell line: %q, want ~", l)
	}
	if l := lines["bridge-nf-off|service|iptables|tcp_stream"]; !strings.Contains(l, "failed as expected in both") {
		t.Errorf("predicted failure line: %q, want it said", l)
	}

	_, errOut, code = runVnetlab(t, bin, "compare", oldPath, newPath, "--fail-on-regression", "5%")
	if code == 0 || !strings.Contains(errOut, "1 cell regressed by more than 5%: veth-routed|pod||tcp_stream (-20.0%") {
		t.Errorf("--fail-on-regression 5%%: exit %d, stderr %q; want non-zero naming veth-routed", code, errOut)
	}
	if strings.Contains(errOut, "bridge|pod||tcp_rr") {
		t.Errorf("the noisy unchanged cell was called a regression: %q", errOut)
	}
	if _, errOut, code = runVnetlab(t, bin, "compare", oldPath, newPath, "--fail-on-regression", "25%"); code != 0 {
		t.Errorf("--fail-on-regression 25%%: exit %d (%s), want 0: the cell lost 20%%", code, errOut)
	}
	if _, errOut, code = runVnetlab(t, bin, "compare", oldPath, newPath, "--fail-on-regression", "five"); code == 0 || !strings.Contains(errOut, "not a percentage") {
		t.Errorf("bad threshold: exit %d, %q", code, errOut)
	}
	if _, errOut, code = runVnetlab(t, bin, "compare", oldPath); code == 0 || !strings.Contains(errOut, "two results files") {
		t.Errorf("one file: exit %d, %q", code, errOut)
	}
}

func TestReportCommand(t *testing.T) {
	bin := vnetlabBin(t)
	dir := filepath.Join(t.TempDir(), "rep")
	fixture, _ := filepath.Abs("../../internal/present/report/testdata/results.json")
	if _, errOut, code := runVnetlab(t, bin, "report", fixture, "-o", dir); code != 0 {
		t.Fatalf("report exited %d: %s", code, errOut)
	}
	for _, f := range []string{"report.md", "report.html", "chart-tcp_stream.svg", "chart-tcp_stream.png", "cpu-tcp_rr.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, errOut, code := runVnetlab(t, bin, "report", fixture); code == 0 || !strings.Contains(errOut, "add -o DIR") {
		t.Errorf("no -o: exit %d, %q", code, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte("{nope"), 0o644)
	if _, errOut, code := runVnetlab(t, bin, "report", bad, "-o", dir+"2"); code == 0 || !strings.Contains(errOut, "not a vnetlab results file") {
		t.Errorf("bad file: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(dir + "2"); err == nil {
		t.Error("a refused report left its directory behind")
	}
}

// One file of a lab beside a cluster (kube run with kube.lab): its lab
// cells against its cluster cells, paired by path.
func TestCompareOneLabClusterFile(t *testing.T) {
	bin := vnetlabBin(t)
	labCell := cellOf("host-gw", "tcp_rr", "trans/s", 10000, 10010, 9990, 10005, 9995)
	labCell.Nodes = 2
	clusterCell := cellOf("fl", "tcp_rr", "trans/s", 8000, 8010, 7990, 8005, 7995)
	clusterCell.Placement = "cross-node"
	f := &results.File{SchemaVersion: 1, Metadata: results.Metadata{Cluster: &results.Cluster{Name: "fl", CNI: "flannel", CNIPlugin: "flannel", CNIMode: "host-gw", KubeProxyMode: "iptables"}},
		Cells: []*results.Cell{labCell, clusterCell}}
	path := filepath.Join(t.TempDir(), "both.json")
	if err := results.Write(path, f); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runVnetlab(t, bin, "compare", path)
	if code != 0 || !strings.Contains(out, "fl|pod||tcp_rr|@cross-node") || !strings.Contains(out, "-20.0%") {
		t.Errorf("compare both.json: exit %d, stderr %q, stdout\n%s\nwant host-gw paired with fl pod@cross-node at -20.0%%", code, errOut, out)
	}
}

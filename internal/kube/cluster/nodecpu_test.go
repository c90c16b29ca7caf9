package cluster

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// junitFailures is how many cases of the JUnit suite named suite failed.
func junitFailures(t *testing.T, file, suite string) (failures, cases int) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Name     string `xml:"name,attr"`
			Failures int    `xml:"failures,attr"`
			Tests    int    `xml:"tests,attr"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, s := range doc.Suites {
		if s.Name == "vnetlab "+suite {
			return s.Failures, s.Tests
		}
	}
	t.Fatalf("%s has no suite %q:\n%s", file, suite, b)
	return 0, 0
}

// A local cluster's cells record each node's CPU from its cgroup: present
// in every sample for both nodes, non-zero on both for a cross-node cell,
// larger on the server's node for a same-node cell (both pods are there,
// the other node idles), and never more than the whole machine spent.
// --tolerance 0.1 against host exits 1 exactly when a pod cell is SHORT,
// and its JUnit export fails the same cells; constructed results (pod at
// half of host, pod equal to host) fail and pass as they must.
func TestKubeRunNodeCPUAndTolerance(t *testing.T) {
	cs := needCluster(t)
	dir := t.TempDir()
	out, junit := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml")
	load := func() string { b, _ := os.ReadFile("/proc/loadavg"); return strings.TrimSpace(string(b)) }
	t.Logf("load average before: %s", load())
	log, runErr := vnetlab(t, 10*time.Minute, "kube", "run", "--cluster", testCluster, "--paths", "pod,host",
		"--placements", "same-node,cross-node", "--tests", "tcp_stream", "--repeat", "4", "--duration", "1s",
		"--tolerance", "0.1", "-o", out, "--export", "junit:"+junit)
	t.Logf("load average after: %s", load())
	t.Logf("kube run (exit %v):\n%s", runErr, log)
	f, err := results.Read(out)
	if err != nil {
		t.Fatalf("%v (kube run: %v)", err, runErr)
	}
	n1, n2 := testState.Nodes[0].Name, testState.Nodes[1].Name
	if cl := f.Metadata.Cluster; cl == nil || !strings.HasPrefix(cl.NodeCPU, results.NodeCPUCgroup+":") {
		t.Fatalf("cluster metadata does not say how node CPU was read: %+v", cl)
	}
	if !strings.Contains(log, "CPU per node") {
		t.Errorf("the table has no per-node CPU section")
	}
	byName := map[string]*results.Cell{}
	for _, c := range f.Cells {
		byName[c.Path+"@"+c.Placement] = c
		for i, s := range c.Samples {
			if !s.Valid {
				t.Fatalf("%s sample %d failed: %s", c.ID(), i+1, s.Error)
			}
			a, b := s.NodeCPU[n1], s.NodeCPU[n2]
			if a == nil || b == nil || s.CPU == nil {
				t.Fatalf("%s sample %d: node CPU %v, machine CPU %v", c.ID(), i+1, s.NodeCPU, s.CPU)
			}
			// A node's cgroup is part of the machine: never more than it
			// spent (a tick of rounding each side) nor than its CPUs can.
			slack := 0.05
			if nodes := a.BusySec() + b.BusySec(); nodes > s.CPU.BusySec()*1.2+slack || nodes > s.CPU.WallSec*float64(f.Metadata.CPUs)+slack {
				t.Errorf("%s sample %d: nodes %.3f s busy, the machine %.3f s over %.2f s", c.ID(), i+1, nodes, s.CPU.BusySec(), s.CPU.WallSec)
			}
		}
	}
	cross, same := byName[measure.PathPod+"@"+measure.CrossNode], byName[measure.PathPod+"@"+measure.SameNode]
	if cross == nil || same == nil || cross.CPU == nil || same.CPU == nil {
		t.Fatalf("no pod cells with CPU: %v", byName)
	}
	for _, n := range []string{n1, n2} {
		if c := cross.CPU.Nodes[n]; c == nil || c.BusySec <= 0 || c.PerGB <= 0 {
			t.Errorf("cross-node: node %s CPU %+v, want busy time and a cost per GB", n, c)
		}
	}
	busy, idle := same.CPU.Nodes[n1], same.CPU.Nodes[n2]
	if busy == nil || idle == nil || busy.BusySec <= idle.BusySec || busy.BusySec < 0.05 {
		t.Errorf("same-node on %s: its CPU %+v should exceed the idle node %s's %+v", n1, busy, n2, idle)
	}

	// The run's verdict is the decision on its own samples.
	checks := analysis.HostChecks(f.Cells, 0.1)
	short := 0
	for _, h := range checks {
		t.Logf("tolerance: %s", h)
		if h.Outcome == analysis.Short {
			short++
		}
	}
	if len(checks) != 2 {
		t.Fatalf("%d tolerance checks, want 2 (same-node, cross-node)", len(checks))
	}
	if (runErr != nil) != (short > 0) || (short > 0 && !strings.Contains(log, "tolerance 0.1: the pod path is significantly below host")) {
		t.Errorf("kube run exit %v with %d SHORT checks", runErr, short)
	}
	if failed, n := junitFailures(t, junit, "tolerance"); failed != short || n != 2 {
		t.Errorf("JUnit tolerance suite: %d failures of %d cases, want %d of 2", failed, n, short)
	}

	// Constructed results: the pod path at half of host, then equal to it.
	// The host samples are made steady first (a measured host cell on a
	// busy machine may spread over 3x, which half of it overlaps): the
	// verdicts are then the decision's on known values.
	for _, c := range f.Cells {
		if c.Path == measure.PathHost {
			for i := range c.Samples {
				c.Samples[i].Value = 10e9 * (1 + float64(i)*0.002)
			}
		}
	}
	for _, tc := range []struct {
		scale float64
		fail  int
	}{{0.5, 2}, {1, 0}} {
		for _, c := range f.Cells {
			if c.Path != measure.PathPod {
				continue
			}
			host := byName[measure.PathHost+"@"+c.Placement]
			for i := range c.Samples {
				c.Samples[i].Value = host.Samples[i].Value * tc.scale * (1 + float64(i%2)*0.001)
			}
		}
		crafted := filepath.Join(dir, "crafted.json")
		if err := results.Write(crafted, f); err != nil {
			t.Fatal(err)
		}
		xmlFile := filepath.Join(dir, "crafted.xml")
		if log, err := vnetlab(t, time.Minute, "export", crafted, "--format", "junit", "-o", xmlFile); err != nil {
			t.Fatalf("export: %v\n%s", err, log)
		}
		if failed, _ := junitFailures(t, xmlFile, "tolerance"); failed != tc.fail {
			t.Errorf("pod at %.1f of host: %d failing tolerance cases, want %d", tc.scale, failed, tc.fail)
		}
	}
	if left := labelledNamespaces(t, cs); len(left) > 0 {
		t.Errorf("kube run left namespaces %v", left)
	}
}

// Through its kubeconfig alone, a cluster's nodes are read by a helper pod
// on each (their /proc/stat: idle time too, which no cgroup has), the pods
// go with the run's namespace, and as both nodes are this machine (one
// boot id) a cell's CPU counts it once.
func TestKubeRunNodeCPUThroughHelperPods(t *testing.T) {
	cs := needCluster(t)
	out := filepath.Join(t.TempDir(), "r.json")
	log, err := vnetlab(t, 5*time.Minute, "kube", "run", "--kubeconfig", testState.Facts[FactKubeconfig], "--image", testState.Facts[FactImage],
		"--paths", "pod", "--placements", "cross-node", "--tests", "tcp_stream", "--repeat", "2", "--duration", "1s", "-o", out)
	if err != nil {
		t.Fatalf("kube run: %v\n%s", err, log)
	}
	f, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if cl := f.Metadata.Cluster; cl == nil || !strings.HasPrefix(cl.NodeCPU, results.NodeCPUProcStat+":") {
		t.Fatalf("cluster metadata does not say the nodes were read through helper pods: %+v", cl)
	}
	c := f.Cells[0]
	for i, s := range c.Samples {
		for _, n := range testState.Nodes {
			nc := s.NodeCPU[n.Name]
			// /proc/stat accounts for every CPU's whole window (busy, or
			// idle: none when the stream saturates both CPUs); a cgroup
			// has only its own busy time.
			if nc == nil || nc.BusySec() <= 0 || nc.BusySec()+nc.IdleSec+nc.StealSec < 0.8*nc.WallSec*float64(runtime.NumCPU()) {
				t.Fatalf("sample %d: node %s CPU %+v, want its /proc/stat's busy and idle time covering %d CPUs", i+1, n.Name, nc, runtime.NumCPU())
			}
		}
		// One machine: the cell's CPU is not the two nodes' readings added.
		if s.CPU == nil || s.CPU.BusySec() > 1.5*s.NodeCPU[testState.Nodes[0].Name].BusySec()+0.05 {
			t.Errorf("sample %d: cell CPU %+v double-counts this machine (node reading %+v)", i+1, s.CPU, s.NodeCPU[testState.Nodes[0].Name])
		}
	}
	if left := labelledNamespaces(t, cs); len(left) > 0 {
		t.Errorf("kube run left namespaces (and their helper pods) %v", left)
	}
}

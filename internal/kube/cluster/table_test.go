package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
)

// kube run over two configurations (a scenario's kube.clusters), each
// also measured with 20 extra Services: the package's cluster reused (same
// settings: measured, its extra Services deleted, left up) and a one-node
// cluster with vnetlab's proxy brought up, measured and removed; one
// results file names every cell by its configuration, and nothing of the
// fresh cluster or of the run's namespaces remains.
func TestKubeRunTable(t *testing.T) {
	cs := needCluster(t)
	const fresh = "vktt"
	dir := t.TempDir()
	file := filepath.Join(dir, "table.yaml")
	body := fmt.Sprintf(`tests: [tcp_rr]
duration: 1s
repeat: 1
kube:
  paths: [pod, service]
  placements: [same-node]
  clusters:
    - {name: reused, cluster: %s, proxy: iptables, nodes: 2, extra_services: 20}
    - {name: fresh-ebpf, cluster: %s, proxy: vnetlab-ebpf, nodes: 1, extra_services: 20}
`, testCluster, fresh)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	freshState := &lab.State{Name: fresh, Nodes: []lab.NodeState{{Name: NodeName(fresh, 1)}}}
	t.Cleanup(func() {
		if _, err := lab.Load(fresh); err == nil {
			Down(fresh, nil)
		}
	})
	out := filepath.Join(dir, "r.json")
	log, err := vnetlab(t, 5*time.Minute, "kube", "run", "-f", file, "-o", out)
	if err != nil {
		t.Fatalf("kube run: %v\n%s", err, log)
	}
	// The reused cluster's extra Services are deleted; the fresh one's go with it.
	for _, want := range []string{"reusing cluster " + testCluster, "cluster " + fresh + " up in", "created 20 Services and 20 EndpointSlices in",
		"the proxy carried a Service created after them", "deleted the 20 extra Services", "the 20 extra Services go with the cluster",
		"cluster " + fresh + " removed"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	f, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range f.Cells {
		names = append(names, c.ID().String())
		if c.Valid != 1 || c.Median <= 0 {
			t.Errorf("%s: %d valid samples, median %g", c.ID(), c.Valid, c.Median)
		}
	}
	want := "reused/pod@same-node/tcp_rr reused/service(iptables)@same-node/tcp_rr " +
		"reused/pod(+20)@same-node/tcp_crr reused/service(iptables+20)@same-node/tcp_crr " +
		"fresh-ebpf/pod@same-node/tcp_rr fresh-ebpf/service(vnetlab-ebpf)@same-node/tcp_rr " +
		"fresh-ebpf/pod(+20)@same-node/tcp_crr fresh-ebpf/service(vnetlab-ebpf+20)@same-node/tcp_crr"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("cells:\n got %s\nwant %s", got, want)
	}
	if cl := f.Metadata.Clusters; len(cl) != 2 || cl[0].Name != "reused" || cl[0].KubeProxyMode != "iptables" || cl[1].Name != "fresh-ebpf" || len(cl[1].Nodes) != 1 {
		t.Errorf("clusters metadata: %+v", cl)
	}
	if r, err := vnetlab(t, time.Minute, "ratio", out, "fresh-ebpf/service(vnetlab-ebpf+20)@same-node/tcp_crr", "fresh-ebpf/pod(+20)@same-node/tcp_crr"); err != nil {
		t.Errorf("ratio: %v\n%s", err, r)
	}
	// The reused cluster stays, without the run's namespaces; the fresh one is gone.
	if _, err := Load(testCluster); err != nil {
		t.Errorf("the reused cluster was removed: %v", err)
	}
	if left := labelledNamespaces(t, cs); len(left) > 0 {
		t.Errorf("kube run left namespaces %v in %s", left, testCluster)
	}
	if msg := Leftovers(freshState, nil); msg != "" {
		t.Errorf("cluster %s left: %s", fresh, msg)
	}
}

// Ctrl-C once the extra Services exist: the run removes the cluster it
// brought up (and with it the Services) and exits non-zero.
func TestKubeRunTableInterrupted(t *testing.T) {
	needCluster(t)
	const fresh = "vkti"
	dir := t.TempDir()
	file := filepath.Join(dir, "table.yaml")
	// One path, so the run is short before the Services, and measures for
	// several seconds after them: the signal lands mid-run.
	body := fmt.Sprintf(`tests: [tcp_rr]
duration: 2s
repeat: 2
kube:
  paths: [service]
  placements: [same-node]
  clusters:
    - {name: doomed, cluster: %s, proxy: vnetlab-ebpf, nodes: 1, extra_services: 20}
`, fresh)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	st := &lab.State{Name: fresh, Nodes: []lab.NodeState{{Name: NodeName(fresh, 1)}}}
	t.Cleanup(func() {
		if _, err := lab.Load(fresh); err == nil {
			Down(fresh, nil)
		}
	})
	log, _ := interrupted(t, 3*time.Minute, "created 20 Services", "the run to create its extra Services", "kube", "run", "-f", file)
	for _, want := range []string{"the 20 extra Services go with the cluster", "cluster " + fresh + " removed"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if msg := Leftovers(st, nil); msg != "" {
		t.Errorf("cluster %s left: %s", fresh, msg)
	}
}

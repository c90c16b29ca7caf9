package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/results"
)

// kube converge on the test cluster (kube-proxy, iptables): every change of
// each kind is applied on every node, each latency lies between its write
// and the change timeout, the rows cover each kind per node and for all
// nodes, and nothing is left in the cluster.
func TestKubeConverge(t *testing.T) {
	cs := needCluster(t)
	out := filepath.Join(t.TempDir(), "c.json")
	log, err := vnetlab(t, 10*time.Minute, "kube", "converge", "--cluster", testCluster, "--changes", "8", "--change-timeout", "5s", "-o", out)
	if err != nil {
		t.Fatalf("kube converge: %v\n%s", err, log)
	}
	t.Log(log)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var c results.Convergence
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Proxy != "iptables" || len(c.Changes) != 8 {
		t.Fatalf("proxy %q, %d changes; want iptables and 8", c.Proxy, len(c.Changes))
	}
	for _, ch := range c.Changes {
		if len(ch.NotApplied) > 0 || len(ch.LatencyUS) != 2 {
			t.Errorf("change %d (%s): not applied on %v, latencies %v", ch.Seq, ch.Kind, ch.NotApplied, ch.LatencyUS)
		}
		for n, us := range ch.LatencyUS {
			if us < 0 || us > (5*time.Second).Microseconds() {
				t.Errorf("change %d (%s) on %s: %d µs, outside its write and the change timeout", ch.Seq, ch.Kind, n, us)
			}
		}
	}
	rows := map[string]bool{}
	for _, r := range c.Rows {
		rows[r.Kind+"/"+r.Node] = true
	}
	for _, k := range converge.Kinds {
		for _, n := range []string{testState.Nodes[0].Name, testState.Nodes[1].Name, converge.AllNodes} {
			if !rows[k+"/"+n] {
				t.Errorf("no row for %s on %s", k, n)
			}
		}
	}
	if left := labelledNamespaces(t, cs); len(left) > 0 {
		t.Errorf("kube converge left namespaces %v", left)
	}
}

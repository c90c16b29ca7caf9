package cluster

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

// kube readiness on the test cluster (bridge CNI), bursts of 1 and 4 pods,
// 2 rounds: every pod of every round has a time, each positive and below
// the burst timeout, each round's last-pod time is at least its slowest
// pod's, the quantiles lie within the measured times, the file names the
// cluster's CNI, and nothing is left in the cluster.
func TestKubeReadiness(t *testing.T) {
	cs := needCluster(t)
	out := filepath.Join(t.TempDir(), "r.json")
	const timeout = 2 * time.Minute
	log, err := vnetlab(t, 8*time.Minute, "kube", "readiness", "--cluster", testCluster, "--pods", "1,4", "--repeat", "2",
		"--timeout", timeout.String(), "-o", out)
	if err != nil {
		t.Fatalf("kube readiness: %v\n%s", err, log)
	}
	t.Log(log)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var run results.ReadinessRun
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	if len(run.Clusters) != 1 || len(run.Comparisons) != 0 {
		t.Fatalf("%d clusters, %d comparisons: want 1 and none", len(run.Clusters), len(run.Comparisons))
	}
	r := run.Clusters[0]
	if r.Name != testCluster || r.Cluster == nil || r.Cluster.CNI == "" || len(r.Bursts) != 2 {
		t.Fatalf("cluster %q %+v, %d bursts: want %s, its CNI named and 2 bursts", r.Name, r.Cluster, len(r.Bursts), testCluster)
	}
	for i, want := range []int{1, 4} {
		bu := r.Bursts[i]
		if bu.Pods != want || len(bu.Rounds) != 2 {
			t.Fatalf("burst %d: %d pods, %d rounds; want %d and 2", i, bu.Pods, len(bu.Rounds), want)
		}
		var all []float64
		for j, rd := range bu.Rounds {
			if len(rd.FirstPacketUS) != want {
				t.Errorf("burst of %d, round %d: %d times", want, j, len(rd.FirstPacketUS))
				continue
			}
			for _, us := range rd.FirstPacketUS {
				if us <= 0 || us >= float64(timeout.Microseconds()) {
					t.Errorf("burst of %d, round %d: a time of %.0f µs, want above 0 and below %s", want, j, us, timeout)
				}
			}
			if rd.LastUS < slices.Max(rd.FirstPacketUS) {
				t.Errorf("burst of %d, round %d: last pod %.0f µs before its slowest pod's %.0f", want, j, rd.LastUS, slices.Max(rd.FirstPacketUS))
			}
			all = append(all, rd.FirstPacketUS...)
		}
		lo, hi := slices.Min(all), slices.Max(all)
		for _, q := range []results.QuantileCI{bu.P50, bu.P90, bu.P99} {
			if q.Value < lo || q.Value > hi {
				t.Errorf("burst of %d: quantile %.0f outside the times [%.0f, %.0f]", want, q.Value, lo, hi)
			}
		}
		if bu.MaxUS != hi {
			t.Errorf("burst of %d: max %.0f, want %.0f", want, bu.MaxUS, hi)
		}
	}
	if left := labelledNamespaces(t, cs); len(left) > 0 {
		t.Errorf("kube readiness left namespaces %v", left)
	}
}

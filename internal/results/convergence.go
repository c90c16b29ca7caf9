package results

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// ConvergenceVersion is the version of a convergence file (`kube converge
// -o`, issue 47), which is not a run's File: its cells are changes.
const ConvergenceVersion = 1

// Convergence is what `kube converge` measured: every change it wrote
// through the API and, per node, the transitions its prober saw; Rows are
// their latencies summarised (docs/kubernetes.md, "Network programming
// latency").
type Convergence struct {
	ConvergenceVersion int      `json:"convergence_version"`
	Cluster            *Cluster `json:"cluster,omitempty"`
	Proxy              string   `json:"proxy"` // the cluster's Service proxy, "unknown proxy" when not found
	// A lab's policy apply latency (`policy converge`, issue 44): the
	// policy provider, and the generated policies and ipBlocks present.
	PolicyProvider string        `json:"policy_provider,omitempty"`
	Policies       int           `json:"policies,omitempty"`
	IPBlocks       int           `json:"ipblocks,omitempty"`
	Start          time.Time     `json:"start"`
	End            time.Time     `json:"end"`
	IntervalUS     int64         `json:"probe_interval_us"` // between a prober's probes: the latencies' resolution
	Changes        []Change      `json:"changes"`
	Transitions    []Transition  `json:"transitions"`
	Rows           []ConvergeRow `json:"rows"`
}

// Change is one write through the API and what each node made of it.
type Change struct {
	Seq     int    `json:"seq"`
	Kind    string `json:"kind"`
	Target  string `json:"target"`  // the probed clusterIP:port
	Written int64  `json:"written"` // Unix ns, just before the write's call
	// Shows is the answer that shows the change (a backend's name, or
	// "!NAME": any answer but NAME's; "!" any non-answer).
	Shows string `json:"shows"`
	// LatencyUS by node: from Written to the send of the first probe that
	// showed it; a node missing was NotApplied.
	LatencyUS  map[string]int64 `json:"latency_us"`
	NotApplied []string         `json:"not_applied,omitempty"`
}

// Transition is a change of what a node's probes saw (converge.Transition).
type Transition struct {
	Node   string `json:"node"`
	Target string `json:"target"`
	Sent   int64  `json:"sent"`
	Seq    uint64 `json:"seq"`
	Answer string `json:"answer"`
}

// ConvergeRow is one kind of change on one node (Node "all nodes": per
// change, the slowest node) summarised: quantiles in µs, each with its
// bootstrap 95% CI.
type ConvergeRow struct {
	Kind       string     `json:"kind"`
	Node       string     `json:"node"`
	Changes    int        `json:"changes"`
	NotApplied int        `json:"not_applied"`
	P50        QuantileCI `json:"p50_us"`
	P90        QuantileCI `json:"p90_us"`
	P99        QuantileCI `json:"p99_us"`
	MaxUS      float64    `json:"max_us"`
}

// QuantileCI is a quantile and its 95% CI ([lo, hi]; absent when too few
// values to resample).
type QuantileCI struct {
	Value float64    `json:"value"`
	CI    [2]float64 `json:"ci,omitzero"`
}

// WriteConvergence writes c as indented JSON to path.
func WriteConvergence(path string, c *Convergence) error {
	c.ConvergenceVersion = ConvergenceVersion
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

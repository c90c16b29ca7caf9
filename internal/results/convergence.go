package results

import (
	"encoding/json"
	"fmt"
	"time"
)

// ConvergenceVersion is the version of a convergence file (`kube converge
// -o`), which is not a run's File: its cells are changes.
const ConvergenceVersion = 1

// Convergence is what `kube converge` measured: every change it wrote
// through the API and, per node, the transitions its prober saw; Rows are
// their latencies summarised (docs/kubernetes-converge.md, "Network programming
// latency").
type Convergence struct {
	ConvergenceVersion int      `json:"convergence_version"`
	Cluster            *Cluster `json:"cluster,omitempty"`
	Proxy              string   `json:"proxy"` // the cluster's Service proxy, "unknown proxy" when not found
	// A lab's policy apply latency (`policy converge`): the
	// policy provider, and the generated policies and ipBlocks present.
	PolicyProvider string    `json:"policy_provider,omitempty"`
	Policies       int       `json:"policies,omitempty"`
	IPBlocks       int       `json:"ipblocks,omitempty"`
	Start          time.Time `json:"start"`
	End            time.Time `json:"end"`
	IntervalUS     int64     `json:"probe_interval_us"` // between a prober's probes: the latencies' resolution
	// Pause bounds the random pause after each change, as --pause takes
	// it ("50ms-250ms", converge.Pace); absent in files from before the
	// flag, whose pause was 50-250 ms.
	Pause string `json:"pause,omitempty"`
	// ProbeConntrackTimeoutS: the conntrack timeout the probers' own UDP
	// flows had on the nodes (converge.LimitFlows); 0: the kernel's (30 s),
	// as on a cluster that is not local, and in files from before it.
	ProbeConntrackTimeoutS int           `json:"probe_conntrack_timeout_s,omitempty"`
	Changes                []Change      `json:"changes"`
	Transitions            []Transition  `json:"transitions"`
	Rows                   []ConvergeRow `json:"rows"`
	// ProxySyncs, by node: the proxy's syncs while the changes were
	// measured, from its kubeproxy_sync_proxy_rules_duration_seconds (a
	// local cluster's proxies are scraped; absent elsewhere).
	ProxySyncs map[string]ProxySyncs `json:"proxy_syncs,omitempty"`
	// Scale is the background: the other Services present, and what the
	// cluster's daemons used (a local cluster's).
	Scale *Scale `json:"scale,omitempty"`
	// CRR is tcp_crr to a Service created after the changes (and the N
	// others), when asked for (kube converge --crr).
	CRR *NewestCRR `json:"newest_crr,omitempty"`
	// Controller is the EndpointSlice controller's share, measured apart
	// after the changes (kube converge --controller-changes).
	Controller *ControllerShare `json:"controller,omitempty"`
	// OtherWork is what the machine's other processes used during a local
	// cluster's run (absent elsewhere, and in files from before it).
	OtherWork *OtherWork `json:"other_work,omitempty"`
}

// OtherWork is the CPU time used during a local cluster's run by the
// machine's other processes: those in its network namespace that are
// neither the cluster's nor vnetlab's (cpu.OtherWorkOf), such as a
// compile beside the run. On a small machine such work delays the
// cluster's daemons and probers: the changes it overlapped are flagged
// (analysis.Disturbed).
type OtherWork struct {
	// Phases: its CPU seconds in each phase (Phase*).
	Phases map[string]float64 `json:"phases"`
	// Samples: the changes phase in consecutive intervals.
	Samples []OtherWorkSample `json:"samples"`
	// ReadSeconds: how long its readings took in the changes phase (the
	// meter's own cost, wall time of reading /proc).
	ReadSeconds float64 `json:"read_seconds"`
	// Top: the names of the processes that used most of it in the
	// changes phase, by their own time (a process that lived less than an
	// interval is in the sums, through the process that reaped it, but
	// not here).
	Top []NamedCPU `json:"top,omitempty"`
}

// ChangesSeconds is how long the changes phase's samples span.
func (o OtherWork) ChangesSeconds() float64 {
	if len(o.Samples) == 0 {
		return 0
	}
	return float64(o.Samples[len(o.Samples)-1].End-o.Samples[0].Start) / 1e9
}

// OtherWorkSample is the other work's CPU seconds in one interval (Unix ns).
type OtherWorkSample struct {
	Start      int64   `json:"start"`
	End        int64   `json:"end"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// CPUs is the sample's mean use, in CPUs.
func (s OtherWorkSample) CPUs() float64 {
	if s.End <= s.Start {
		return 0
	}
	return s.CPUSeconds / (float64(s.End-s.Start) / 1e9)
}

// NamedCPU is the CPU seconds of the processes of one name.
type NamedCPU struct {
	Name       string  `json:"name"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// ControllerShare is the EndpointSlice controller's share of network
// programming latency: kube converge's changes start at the slice's write,
// which in a cluster the controller makes after a pod changed. Each of
// Changes is a pod's label written (into or out of a Service's selector),
// timed to the watch event of the Service's EndpointSlice with the pod in
// (or out).
type ControllerShare struct {
	Changes    int        `json:"changes"`
	NotApplied int        `json:"not_applied"` // no such slice within the change timeout
	P50        QuantileCI `json:"p50_us"`
	P99        QuantileCI `json:"p99_us"`
	MaxUS      float64    `json:"max_us"`
}

// NewestCRR is tcp_crr to the newest Service: each sample's connections
// per second (one client).
type NewestCRR struct {
	Target  string    `json:"target"`
	Seconds float64   `json:"seconds"` // each sample's
	Rates   []float64 `json:"rates"`
	// Pins: the CPUs of the client and the server (cpupin.Pins.String:
	// "1" both on CPU 1; "none" unpinned, as files before it say by
	// having none).
	Pins string `json:"pins,omitempty"`
}

// Scale is the N other Services, each with E endpoints, present while the
// changes were measured, and what making and holding them cost.
type Scale struct {
	Services      int     `json:"services"`
	Endpoints     int     `json:"endpoints_per_service"`
	Reused        int     `json:"reused,omitempty"` // of Services, kept from an earlier run
	CreateSeconds float64 `json:"create_seconds"`   // the API writes of those not reused
	// APIBytesPerService: the API server's and etcd's resident memory
	// growth over the Services created (not reused), per Service.
	APIBytesPerService float64 `json:"api_bytes_per_service,omitempty"`
	// BPFMapBytes: the memory charged for the eBPF maps pinned in every
	// node's plane (vnetlab's proxies), after the warm-up; BPFMapParts,
	// the same by the part of the node's data path they serve (MapPart*).
	// Files before BPFMapParts have the sum alone.
	BPFMapBytes int64            `json:"bpf_map_bytes,omitempty"`
	BPFMapParts map[string]int64 `json:"bpf_map_parts,omitempty"`
	Use         []DaemonUse      `json:"use,omitempty"`
}

// The parts of a node's plane, for Scale.BPFMapParts.
const (
	MapPartProxy   = "proxy"        // the Service proxy's: its tc programs' (services, backends, conntrack, affinity, NodePort) and its socket programs'
	MapPartRouting = "host-routing" // the CNI's veth-ebpf routing (pod routes, flows via the host's stack)
	MapPartPolicy  = "policy"       // the NetworkPolicy enforcer's
	MapPartOther   = "other"        // a map of none of these
)

// The phases a DaemonUse covers.
const (
	PhaseCreate  = "create"  // from the first extra Service's write until every node carried one made after them (the warm-up)
	PhaseIdle    = "idle"    // the next ten seconds, nothing written
	PhaseChanges = "changes" // the measured changes
)

// DaemonUse is one daemon's use in one phase.
type DaemonUse struct {
	Daemon     string  `json:"daemon"` // etcd, kube-apiserver, "NODE proxy"
	Phase      string  `json:"phase"`
	Seconds    float64 `json:"seconds"` // the phase's length
	CPUSeconds float64 `json:"cpu_seconds"`
	RSS        int64   `json:"rss_bytes"`      // at the phase's end
	PeakRSS    int64   `json:"peak_rss_bytes"` // the largest seen, sampled twice a second
}

// ProxySyncs is how many syncs a node's proxy reported and their mean.
type ProxySyncs struct {
	Syncs  int     `json:"syncs"`
	MeanUS float64 `json:"mean_us"`
	// Reconciles: kube-proxy's conntrack reconciler's runs in the same
	// time, and their mean (kubeproxy_conntrack_reconciler_sync_duration_seconds;
	// none on vnetlab's proxies).
	Reconciles      int     `json:"conntrack_reconciles,omitempty"`
	ReconcileMeanUS float64 `json:"conntrack_reconcile_mean_us,omitempty"`
	// ConntrackEntries: the node's conntrack entries after the changes.
	ConntrackEntries int64 `json:"conntrack_entries,omitempty"`
}

// Change is one write through the API and what each node made of it.
type Change struct {
	Seq     int    `json:"seq"`
	Kind    string `json:"kind"`
	Target  string `json:"target"`  // the probed clusterIP:port
	Written int64  `json:"written"` // Unix ns, just before the write's call
	// WriteUS is how long the write's call took, to the writer's answer
	// (a cluster's: the API server's admission and etcd's commit): the
	// share of LatencyUS before any proxy can see the change. 0: not
	// recorded (a file from before).
	WriteUS int64 `json:"write_us,omitempty"`
	// Shows is the answer that shows the change (a backend's name, or
	// "!NAME": any answer but NAME's; "!" any non-answer).
	Shows string `json:"shows"`
	// LatencyUS by node: from Written to the send of the first probe that
	// showed it; a node missing was NotApplied.
	LatencyUS  map[string]int64 `json:"latency_us"`
	NotApplied []string         `json:"not_applied,omitempty"`
	// ShownBefore: the nodes whose probes already showed the change when
	// it was written (converge.ShownBefore): a fault of the measurement
	// (a stale conntrack entry deciding a probe's path, an earlier change
	// not settled), not a latency of 0.
	ShownBefore []string `json:"shown_before,omitempty"`
	// Conns, by node: the connections its prober held open through the
	// Service's kept port at the write, and what became of each before the
	// next change's write.
	Conns map[string][]ConnFate `json:"conns,omitempty"`
	// MetricUS, by node: the proxy's own network programming duration for
	// this change (kubeproxy_network_programming_duration_seconds: its sum's
	// growth over its count's, scraped after the change), where the proxy
	// reported one; see Convergence.Metrics.
	MetricUS map[string]int64 `json:"metric_us,omitempty"`
}

// ConnFate is one connection held open at a change's write.
type ConnFate struct {
	Backend string `json:"backend"`
	// Gone: the change took its backend out of the Service (the endpoint
	// removed, or the Service deleted).
	Gone    bool   `json:"gone,omitempty"`
	Broken  bool   `json:"broken,omitempty"`
	AfterUS int64  `json:"after_us,omitempty"` // from the write to the first line it did not answer
	Detail  string `json:"detail,omitempty"`   // reset, timeout, closed, answered by another
	// StallUS: not broken, but a line after the write was answered late
	// (later than the probe timeout): the longest such wait.
	StallUS int64 `json:"stall_us,omitempty"`
}

// Transition is a change of what a node's probes saw (a prober's line,
// converge.Transition).
type Transition struct {
	Node   string `json:"node"`
	Target string `json:"target"`
	Sent   int64  `json:"sent"`
	Seq    uint64 `json:"seq"`
	Answer string `json:"answer"`
	// Event is a kept connection's ("open", "broken", "stalled": Answer is
	// its backend, Sent the connect, the unanswered or late line's send),
	// "" a probe's. A prober also writes "held" lines (an answer unchanged
	// for a while: the driver's evidence that a removal is done); a run
	// does not keep them.
	Event  string `json:"event,omitempty"`
	Detail string `json:"detail,omitempty"`
	// StallUS: a stalled connection's line, how long its answer took.
	StallUS int64 `json:"stall_us,omitempty"`
}

// ConvergeRow is one kind of change on one node (Node "all nodes": per
// change, the slowest node) summarised: quantiles in µs, each with its
// bootstrap 95% CI.
type ConvergeRow struct {
	Kind       string `json:"kind"`
	Node       string `json:"node"`
	Changes    int    `json:"changes"`
	NotApplied int    `json:"not_applied"`
	// ShownBefore: changes the probes showed before their write (no
	// latency; Change.ShownBefore).
	ShownBefore int        `json:"shown_before,omitempty"`
	P50         QuantileCI `json:"p50_us"`
	P90         QuantileCI `json:"p90_us"`
	P99         QuantileCI `json:"p99_us"`
	MaxUS       float64    `json:"max_us"`
	// Connections held open at the changes' writes (ConnFate) and how many
	// broke: to backends the change kept, and to those it took out.
	ConnsHeld       int `json:"conns_held"`
	ConnsBroken     int `json:"conns_broken"`
	GoneConnsHeld   int `json:"gone_conns_held"`
	GoneConnsBroken int `json:"gone_conns_broken"`
	// Of those not broken, the connections that stalled (ConnFate.StallUS).
	ConnsStalled     int `json:"conns_stalled,omitempty"`
	GoneConnsStalled int `json:"gone_conns_stalled,omitempty"`
	// The proxy's own metric for the same changes (Change.MetricUS), and
	// how many of them it says were done earlier than the first probe that
	// showed them by more than two probe intervals (done before a packet).
	Metric      *QuantileCI `json:"metric_p50_us,omitempty"`
	MetricP99   *QuantileCI `json:"metric_p99_us,omitempty"`
	MetricEarly int         `json:"metric_early,omitempty"`
	Metrics     int         `json:"metrics,omitempty"` // changes with a metric
	// Write is the p50 of the changes' write calls (Change.WriteUS), the
	// same on every node's row: the writer's share of the latency.
	Write *QuantileCI `json:"write_p50_us,omitempty"`
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
	if err := writeJSON(path, c); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ParseConvergence reads a convergence file's bytes (path names it in
// errors).
func ParseConvergence(path string, b []byte) (*Convergence, error) {
	var c Convergence
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: not a kube converge file: %w", path, err)
	}
	if c.ConvergenceVersion < 1 || c.ConvergenceVersion > ConvergenceVersion {
		return nil, fmt.Errorf("%s: convergence_version %d is not supported (this vnetlab reads up to %d)", path, c.ConvergenceVersion, ConvergenceVersion)
	}
	return &c, nil
}

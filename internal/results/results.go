// Package results is the versioned results file written by `run` and read by
// `report` and `compare` (documented in docs/results-json.md).
package results

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// SchemaVersion grows with every change to the format (TestSchemaGolden
// fails otherwise: testdata/schema-v<SchemaVersion>.golden.json). 2: packets are counted in a proof sample of
// their own and --profile profiles samples of its own, no longer the
// measured ones (version 1's samples carried both instruments' cost).
// 3: an open-loop sample's schedule (offered, achieved, late)
// and the run's rate setting; a cell's policy provider and its policies'
// proof, the run's policy settings. 4: a cluster's
// policy_lab_provider, which pairs a lab's policy cells with its own. 5:
// a local cluster's proxy_since (kube set-proxy). 6: a sample's
// round_index and slot (the rounds' random order), a comparison's method
// (paired by round, or unpaired) and precision, the run's order and
// precision settings. 7: the knobs recorded generically, so that a new
// knob changes no format: the run's knobs as settings.knobs (name ->
// value; were streams, size, links, load, rate, policies, ipblocks), a
// cell's lab knobs' proof as proofs (knob, wanted, got, where,
// not_applied; was links); older files read into these (legacy.go).
const SchemaVersion = 7

// File is one run.
type File struct {
	SchemaVersion int      `json:"schema_version"`
	Metadata      Metadata `json:"metadata"`
	Cells         []*Cell  `json:"cells"`
}

// Metadata describes the machine and the run.
type Metadata struct {
	Vnetlab  string `json:"vnetlab_version"`
	Commit   string `json:"commit,omitempty"`
	Kernel   string `json:"kernel"`
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model,omitempty"`
	// Emulation is set when the CPU was emulated in software (qemu TCG):
	// the run proves correctness only; its numbers mean nothing.
	Emulation   string            `json:"emulation,omitempty"`
	Hostname    string            `json:"hostname,omitempty"`
	Tools       map[string]string `json:"tools"`
	CommandLine []string          `json:"command_line"`
	Scenario    string            `json:"scenario,omitempty"`
	Start       time.Time         `json:"start"`
	End         time.Time         `json:"end"`
	Settings    Settings          `json:"settings"`
	Skipped     []Skipped         `json:"skipped,omitempty"`
	// Cluster is the Kubernetes cluster a `kube run` measured.
	Cluster *Cluster `json:"cluster,omitempty"`
	// Clusters are the configurations of a `kube run` over several local
	// clusters (kube.clusters), each Name being its cells' mode; Cluster is
	// then unset.
	Clusters []Cluster `json:"clusters,omitempty"`
}

// Cluster describes a measured Kubernetes cluster, each fact with how it
// was found (HowDetected, by field name).
type Cluster struct {
	Name          string        `json:"name"`
	ServerVersion string        `json:"server_version"`
	Nodes         []ClusterNode `json:"nodes"`
	// CNI is the CNI as people read it ("vnetlab veth-routed + host-local",
	// "calico+cilium"); CNIPlugin and CNIMode are what it is, structured.
	CNI       string `json:"cni"`
	CNIPlugin string `json:"cni_plugin,omitempty"`
	CNIMode   string `json:"cni_mode,omitempty"`
	// KubeProxyMode is the Service proxy's name (internal/vocab/clusternet's,
	// or kube-proxy's detected mode); SocketLB: vnetlab-ebpf's socket LB on.
	KubeProxyMode string `json:"kube_proxy_mode"`
	SocketLB      bool   `json:"socket_lb,omitempty"`
	// ProxySince is when `kube set-proxy` started the local cluster's
	// proxy (RFC 3339; "": the proxy is kube up's). A kube converge run
	// on kept Services after it did not see the proxy program them: its
	// first sync did, during the switch.
	ProxySince string `json:"proxy_since,omitempty"`
	// NetworkPolicy is the NetworkPolicy enforcer (internal/vocab/clusternet's
	// Enforcers' name; "" when unknown: a cluster vnetlab did not build).
	NetworkPolicy string `json:"network_policy,omitempty"`
	// PolicyLabProvider is the lab policy provider with the data path of
	// the enforcer on this cluster's CNI (clusternet.Enforcer's
	// LabProviderFor): what a lab's policy cell is paired with (compare)
	// and whose profile stages are the enforcer's CPU; "" when nothing
	// enforces or it is unknown.
	PolicyLabProvider string            `json:"policy_lab_provider,omitempty"`
	Image             string            `json:"image"`
	Namespace         string            `json:"namespace"`
	HowDetected       map[string]string `json:"how_detected"`
	// NodeCPU says how the cells' per-node CPU (Sample.NodeCPU) was read:
	// NodeCPUCgroup or NodeCPUProcStat, and its limits; "" when it was not.
	NodeCPU string `json:"node_cpu,omitempty"`
}

// How a cluster's per-node CPU is read (Cluster.NodeCPU starts with one).
const (
	// NodeCPUCgroup: a local cluster's nodes share this machine's
	// /proc/stat, so each node's CPU is its cgroup's (cpu.stat).
	NodeCPUCgroup = "cgroup"
	// NodeCPUProcStat: each node's own /proc/stat, read by a helper pod.
	NodeCPUProcStat = "proc-stat"
)

// Network is the cluster's network, structured; a cluster of a file written
// before the structured fields has it read back from its texts.
func (c *Cluster) Network() clusternet.Network {
	if c.CNIPlugin == "" {
		return clusternet.FromText(c.CNI, c.KubeProxyMode)
	}
	return clusternet.Network{CNI: c.CNIPlugin, CNIMode: c.CNIMode, Proxy: c.KubeProxyMode, SocketLB: c.SocketLB, Policy: c.NetworkPolicy}
}

// PolicyLabProviderOf is the lab policy provider whose data path decides
// cell c's policies: a lab cell's own (Cell.PolicyProvider), a cluster
// cell's enforcer's (Cluster.PolicyLabProvider); "" when none is known.
func (f *File) PolicyLabProviderOf(c *Cell) string {
	if c.PolicyProvider == "" && c.Placement != "" && f.Metadata.Cluster != nil {
		return f.Metadata.Cluster.PolicyLabProvider
	}
	return c.PolicyProvider
}

// SetNetwork records n; text, when not "", is the CNI as detected (else
// n's own text).
func (c *Cluster) SetNetwork(n clusternet.Network, text string) {
	if text == "" {
		text = n.CNIText()
	}
	c.CNI, c.CNIPlugin, c.CNIMode, c.KubeProxyMode, c.SocketLB, c.NetworkPolicy = text, n.CNI, n.CNIMode, n.Proxy, n.SocketLB, n.Policy
}

// upgrade fills the structured network fields of a cluster of a file
// written before them.
func (c *Cluster) upgrade() { c.SetNetwork(c.Network(), c.CNI) }

// ClusterNode describes one node a run used.
type ClusterNode struct {
	Name             string `json:"name"`
	Kernel           string `json:"kernel"`
	OS               string `json:"os"`
	ContainerRuntime string `json:"container_runtime"`
	Kubelet          string `json:"kubelet"`
	InternalIP       string `json:"internal_ip"`
}

// Settings are the run parameters that shape every sample.
type Settings struct {
	Duration string `json:"duration"`
	Repeat   int    `json:"repeat"`
	Warmup   int    `json:"warmup"`
	// How the cells were summarised.
	CVThreshold float64 `json:"cv_threshold,omitempty"` // a cell with a larger cv is "noisy"
	Baseline    string  `json:"baseline,omitempty"`     // mode every cell is compared with
	CIMethod    string  `json:"ci_method,omitempty"`    // "bootstrap-median" or "student-t-mean"
	// CPUAffinity is --cpu-affinity as given ("auto", "none", "1", "0,1");
	// each cell records where its engine actually ran.
	CPUAffinity string `json:"cpu_affinity,omitempty"`
	// Tolerance is kube run --tolerance: a pod cell fails the run when it is
	// significantly below its host cell by more than this ratio (0: not asked).
	Tolerance float64 `json:"tolerance,omitempty"`
	// Knobs are the knobs set for every cell, by name, as flags spell
	// their values ("streams": "4", "mtu": "9000", "rate": "20000"; a
	// knob unset, or rate at max, is left out). Sweep is the sweep whose
	// points the cells are (their point says each swept knob's value).
	// PolicyProviders are the providers enforcing the policy knobs (each
	// a cell coordinate).
	Knobs           map[string]string `json:"knobs,omitempty"`
	PolicyProviders []string          `json:"policy_providers,omitempty"`
	Sweep           *Sweep            `json:"sweep,omitempty"`
	// Order is how the cells were ordered within each round: "random"
	// (each round shuffled anew from OrderSeed, so no cell always follows
	// another) or "fixed" (the plan's order); "" in older files: fixed.
	Order     string `json:"order,omitempty"`
	OrderSeed uint64 `json:"order_seed,omitempty"`
	// Precision is run --precision: the CI half-width (a share of the
	// ratio) every comparison was run to reach, within MaxTime; Looks are
	// the measured rounds at each time the run looked at its comparisons
	// (the last: how many it took; docs/statistics.md).
	Precision float64 `json:"precision,omitempty"`
	MaxTime   string  `json:"max_time,omitempty"`
	Looks     []int   `json:"looks,omitempty"`
	// Duet: the two modes' cells ran at once, each on a CPU of its own,
	// swapped every round (their placement is PlacementDuet).
	Duet bool `json:"duet,omitempty"`
}

// CPUAffinity is where a cell's client and server were pinned.
type CPUAffinity struct {
	Client int `json:"client"`
	Server int `json:"server"`
}

// Skipped names a matrix entry that could not run, and why.
type Skipped struct {
	Mode     string `json:"mode"`
	Provider string `json:"provider,omitempty"`
	Reason   string `json:"reason"`
}

// Cell is one matrix entry: mode x path x provider x test.
type Cell struct {
	Mode        string            `json:"mode"`
	ModeOptions map[string]string `json:"mode_options,omitempty"`
	Path        string            `json:"path"`
	Provider    string            `json:"provider"`
	Test        string            `json:"test"`
	Engine      string            `json:"engine"`
	Unit        string            `json:"unit"`
	Samples     []Sample          `json:"samples"`
	Median      float64           `json:"median"`
	Min         float64           `json:"min"`
	Max         float64           `json:"max"`
	Valid       int               `json:"valid_samples"`
	Failed      int               `json:"failed_samples"`

	// Service path: generated services loaded besides the tested
	// ones, the provider's load time, and why the cell is expected to fail
	// when the kernel dictates it (bridge with nf-call off).
	ExtraServices  int     `json:"extra_services,omitempty"`
	ServiceLoadSec float64 `json:"service_load_s,omitempty"`
	Note           string  `json:"note,omitempty"`
	// Placement is where the platform put the pods (see CellID); "" for labs.
	Placement string `json:"placement,omitempty"`
	// Point is the cell's place in a sweep (see CellID): "streams=4".
	Point string `json:"point,omitempty"`
	// PolicyProvider enforces the lab's NetworkPolicies (see CellID);
	// Policies is their proof.
	PolicyProvider string       `json:"policy_provider,omitempty"`
	Policies       *PolicyProof `json:"policies,omitempty"`
	// Family is the IP family measured (see CellID): "" for IPv4, "ipv6".
	Family string `json:"family,omitempty"`
	// The nodes a Kubernetes cell's client and server pods ran on (kube run).
	ClientNode string `json:"client_node,omitempty"`
	ServerNode string `json:"server_node,omitempty"`
	// Addr is the address a Kubernetes cell's client dialed (kube run: the
	// server's pod IP or the Service's ClusterIP of the cell's family).
	Addr string `json:"addr,omitempty"`
	// Status is the cell's outcome set by internal/results/analysis: "ok", "failed",
	// "failed-as-expected" (Note predicted it) or "worked-unexpectedly".
	Status string `json:"status,omitempty"`

	// Statistics over valid samples (filled by internal/results/analysis).
	Mean     float64            `json:"mean,omitempty"`
	CI95     []float64          `json:"ci95,omitempty"`       // [low, high] of the median or mean, see CIMethod
	CIMethod string             `json:"ci_method,omitempty"`  // "bootstrap-median" or "student-t-mean"
	CV       float64            `json:"cv,omitempty"`         // coefficient of variation (stddev/mean)
	Noisy    bool               `json:"noisy,omitempty"`      // CV above the run's threshold
	Latency  map[string]float64 `json:"latency_us,omitempty"` // median over samples of p50, p90, p99, p99.9 (rr/crr)
	// LatencySamples is, per quantile of Latency, how many latencies are
	// behind it: the sum of its samples' (only when every one said).
	LatencySamples map[string]int `json:"latency_samples,omitempty"`
	// LatencyTooFew are the quantiles left out of Latency: some valid
	// sample had too few latencies for them (p99.9 from under 10^4).
	LatencyTooFew []string `json:"latency_too_few,omitempty"`
	// LatencyCI is each quantile of Latency with its 95% CI: the
	// percentile bootstrap of the median over the samples' values
	// (stats.BootstrapMedianCI; the CI is absent below 2 samples).
	LatencyCI map[string]QuantileCI `json:"latency_ci,omitempty"`
	CPU       *CPUCost              `json:"cpu,omitempty"`
	// Comparison with the baseline cell (same path, provider, test; first mode).
	VsBaseline *Comparison `json:"vs_baseline,omitempty"`
	// A service cell compared with its mode's pod cell (clusterIP/podIP).
	VsPod *Comparison `json:"vs_pod,omitempty"`

	// ModeFacts is how the lab was built on this machine (e.g. the Open
	// vSwitch datapath, "datapath": "netdev"), from the lab's state.
	ModeFacts map[string]string `json:"mode_facts,omitempty"`
	// Nodes is 2 when the lab spanned two nodes (run --nodes 2), else 0.
	Nodes int `json:"nodes,omitempty"`
	// LabMode is the lab's mode when Mode is a label of it (a scenario's
	// "bridge-nf-off", kube.lab_same_node's "host-1node"); "" when Mode is
	// the mode itself.
	LabMode string `json:"lab_mode,omitempty"`
	// CPUAffinity: the CPUs the engine's client and server were pinned to;
	// nil when the scheduler placed them (files before --cpu-affinity too).
	CPUAffinity *CPUAffinity `json:"cpu_affinity,omitempty"`

	// Profile is where the cell's CPU went (run --profile): by
	// stage, by kernel function and data-path events, per unit of work,
	// over the windows of its ProfileSamples: samples of their own, never
	// the measured ones.
	Profile        *Profile `json:"profile,omitempty"`
	ProfileSamples []Sample `json:"profile_samples,omitempty"`

	// The knobs' proof. Proofs: every lab knob read back at every place
	// it acts on (each link's MTU, GSO/GRO sizes, offloads; the pods'
	// qdiscs and congestion control), with what was asked and, where it
	// is not in force, why. Packets: the average packet at the sender's
	// transmit and at the receiver's GRO, counted in ProofSample's window:
	// a sample of the cell's own, with the same traffic and settings,
	// outside Samples and the statistics (a file without
	// proof_sample counted in its measured windows, the counter's cost
	// inside them: Cell.CountedInWindows).
	Proofs      []KnobProof `json:"proofs,omitempty"`
	Packets     *Packets    `json:"packets,omitempty"`
	ProofSample *Sample     `json:"proof_sample,omitempty"`
	// RateMax: a cell at a share of its path's maximum (rate=50%): what
	// 100% was, measured closed-loop before the rounds.
	RateMax *RateMax `json:"rate_max,omitempty"`

	// NotApplied says why the cell's knobs are not in force: the kernel
	// refused or ignored one. Such a cell is never taken as measured with
	// them: it has no samples, or (ignored, found in its packets) its
	// samples are kept but it has no statistics (status "not-applied").
	NotApplied string `json:"not_applied,omitempty"`
}

// CPUCost is what a cell cost the machine, from /proc/stat and /proc/softirqs
// deltas around each sample (medians over valid samples).
type CPUCost struct {
	UserSec    float64 `json:"user_s"`
	SystemSec  float64 `json:"system_s"`
	IRQSec     float64 `json:"irq_s"`
	SoftirqSec float64 `json:"softirq_s"`
	BusySec    float64 `json:"busy_s"`  // user + system + irq + softirq
	Samples    int     `json:"samples"` // valid samples that had CPU counters
	// PerGB: CPU-seconds per GB moved (streams); PerKTrans: per 1000 transactions (rr/crr).
	PerGB         float64 `json:"cpu_s_per_gb,omitempty"`
	PerKTrans     float64 `json:"cpu_s_per_1k_trans,omitempty"`
	NetRxPerTrans float64 `json:"net_rx_softirqs_per_trans,omitempty"`
	NetTxPerTrans float64 `json:"net_tx_softirqs_per_trans,omitempty"`
	NetRxPerGB    float64 `json:"net_rx_softirqs_per_gb,omitempty"`
	NetTxPerGB    float64 `json:"net_tx_softirqs_per_gb,omitempty"`
	// Nodes is what each Kubernetes node cost (kube run; Cluster.NodeCPU
	// says how it was read), by node name.
	Nodes map[string]*CPUCost `json:"nodes,omitempty"`
}

// Comparison of a cell with its baseline.
type Comparison struct {
	Baseline    string    `json:"baseline"`             // the baseline cell's mode
	Ratio       float64   `json:"ratio"`                // median / baseline median
	RatioCI95   []float64 `json:"ratio_ci95,omitempty"` // bootstrap CI of the ratio of medians (2+ valid samples a side)
	Test        string    `json:"test"`                 // "mann-whitney-u"
	PValue      float64   `json:"p_value"`
	Significant bool      `json:"significant"` // p < 0.05
	Verdict     string    `json:"verdict"`     // "faster", "slower", "~" (not significant), "baseline", "n/a" (analysis.Verdict)
	// MinPValue is the smallest p the test could give with these sample
	// counts (Mann-Whitney: 2/C(n1+n2,n1)); above 0.05 no verdict is possible.
	MinPValue float64 `json:"min_p_value"`
	WelchP    float64 `json:"welch_p_value,omitempty"` // Welch t on the means, for reference
	Note      string  `json:"note,omitempty"`          // why there is no verdict ("n/a")
	// Method is how the two cells were set side by side: "paired-rounds"
	// (the ratio of each round's two samples: Hodges-Lehmann estimate, its
	// signed-rank interval and Wilcoxon signed-rank test over Pairs rounds)
	// or "unpaired" (each cell's samples as an independent sample); "" in
	// older files: unpaired.
	Method string `json:"method,omitempty"`
	Pairs  int    `json:"pairs,omitempty"`
	// HalfWidth is the 95% interval's half-width as a share of the ratio;
	// with run --precision, PrecisionMet says whether it reached the
	// target and MetAtRound after how many measured rounds it first did.
	HalfWidth float64 `json:"ci_half_width,omitempty"`
	// Confidence is the interval's level when it is not 0.95 (a precision
	// run's look spends a share of the 5%: docs/statistics.md); the
	// verdict is significant below 1-Confidence.
	Confidence   float64 `json:"confidence,omitempty"`
	PrecisionMet *bool   `json:"precision_met,omitempty"`
	MetAtRound   int     `json:"met_at_round,omitempty"`
}

// Result is what an engine measured in one sample (the runner converts
// engine.Result into it).
type Result struct {
	Value       float64            `json:"value"`
	Retransmits int                `json:"retransmits,omitempty"`
	LossPct     float64            `json:"loss_pct,omitempty"`
	Transfers   float64            `json:"transactions,omitempty"` // rr/crr: count in the sample
	Bytes       float64            `json:"bytes,omitempty"`        // stream: bytes received
	Latency     map[string]float64 `json:"latency_us,omitempty"`   // p50, p90, p99, p99.9, mean
	// LatencySamples: how many latencies this sample's quantiles are from
	// (rr/crr; 0: the engine does not say). A quantile with fewer than 10
	// samples beyond it (p99.9: under 10^4) is left out of Latency.
	LatencySamples int `json:"latency_samples,omitempty"`
	Errors         int `json:"errors,omitempty"` // connect/IO errors (crr)
	// Schedule: an open-loop sample's (--rate on rr/crr tests), whose
	// latencies are from each request's intended send time.
	Schedule *Schedule `json:"schedule,omitempty"`
}

// A Quantile of a latency map (which holds "mean" too): its key and
// percent.
type Quantile struct {
	Key     string
	Percent float64
}

// LatencyQuantiles are the quantiles of a latency map, in order.
var LatencyQuantiles = []Quantile{{"p50", 50}, {"p90", 90}, {"p99", 99}, {"p99.9", 99.9}}

// tailSamples is how many latencies a quantile needs beyond it: with
// fewer its value is one or two latencies' luck.
const tailSamples = 10

// MinSamples is the fewest latencies a quantile is given from: 10 beyond
// it, so p99.9 needs 10^4, p99 10^3, p90 100, p50 20. The rr engine
// leaves out a quantile with fewer (rrbench.Histogram.Summary), a cell one
// whose samples had fewer (analysis: Cell.LatencyTooFew).
func (q Quantile) MinSamples() int {
	return int(math.Ceil(tailSamples / (1 - q.Percent/100) * (1 - 1e-9)))
}

// Schedule is what an open-loop sample offered and how well it kept to it.
type Schedule struct {
	Offered   float64 `json:"offered_rate"` // requests (crr: connections) per second; the achieved rate is the value
	Flows     int     `json:"flows"`
	Scheduled int     `json:"scheduled"` // requests whose intended time fell in the sample
	Sent      int     `json:"sent"`
	Late      int     `json:"late"` // sent 1 ms or more after their intended time
	MaxLagUs  float64 `json:"max_lag_us"`
	Behind    bool    `json:"behind,omitempty"` // over 1% sent late or any left unsent
}

// RateMax is what a cell's share of the maximum (rate=50%) was a share
// of: its path's closed-loop rate (same test, target, pinning and other
// knobs, idle), measured in samples of its own before the run's rounds,
// outside every measured window.
type RateMax struct {
	Share      float64   `json:"share"`       // 0.5 for rate=50%
	ClosedLoop []float64 `json:"closed_loop"` // the calibration samples' rates (the cell's unit)
	Max        float64   `json:"max"`         // their median: 100%
	// Offered is Share × Max, a whole number: what the cell's samples offered.
	Offered float64 `json:"offered_rate"`
	// Error: the maximum could not be measured, or its share is a rate
	// the engine cannot schedule: the cell was not measured.
	Error string `json:"error,omitempty"`
}

// LateShare is the share of the scheduled requests sent late or not at all.
func (s Schedule) LateShare() float64 {
	if s.Scheduled == 0 {
		return 0
	}
	return float64(s.Late+s.Scheduled-s.Sent) / float64(s.Scheduled)
}

// Sample is one measurement; a failed one keeps its error and is never counted.
type Sample struct {
	Result
	Valid bool      `json:"valid"`
	Error string    `json:"error,omitempty"`
	Start time.Time `json:"start"`
	// Round is what an instrumented sample was (Cell.ProofSample,
	// Cell.ProfileSamples): RoundProof, RoundWarmupProof or RoundProfile;
	// "" for a measured one.
	Round string `json:"round,omitempty"`
	// RoundIndex is the measured round the sample belongs to (1, 2, ...;
	// 0 in older files): samples of two cells with the same RoundIndex were
	// taken in one round, side by side in time, and are compared as a
	// pair. Slot is the sample's place in its round (1: first).
	RoundIndex int `json:"round_index,omitempty"`
	Slot       int `json:"slot,omitempty"`
	// Whole-machine CPU time spent during the sample, by class (seconds), and
	// softirqs raised.
	CPU *SampleCPU `json:"cpu,omitempty"`
	// NodeCPU is each Kubernetes node's CPU over the same window (kube run),
	// by node name.
	NodeCPU map[string]*SampleCPU `json:"node_cpu,omitempty"`
}

// PlacementDuet is the placement of a cell measured in a duet (run
// --duet): beside another path, at the same time, each on a CPU of its
// own. Its values are the path's with a neighbour: compared with its
// partner, never with a solo cell (another CellID).
const PlacementDuet = "duet"

// The instrumented rounds (Sample.Round).
const (
	RoundProof       = "proof"        // a round of its own, before the measured ones
	RoundWarmupProof = "warmup+proof" // the last warm-up round, which proves
	RoundProfile     = "profile"      // run --profile: after each measured round
)

// CountedInWindows says that the cell's packets were counted inside its
// measured windows, the counter attached all along: a file written by a
// vnetlab that attached its counter there, whose rr/crr rates read 7-13% low on veth-routed (more on paths
// of more devices, less on fewer).
func (c *Cell) CountedInWindows() bool { return c.Packets != nil && c.ProofSample == nil }

// CountedInWindows says whether any cell of f counted its packets in its
// measured windows (Cell.CountedInWindows).
func (f *File) CountedInWindows() bool {
	for _, c := range f.Cells {
		if c.CountedInWindows() {
			return true
		}
	}
	return false
}

// CountedNote is what such a file's numbers carry, said where they are shown.
const CountedNote = "measured with vnetlab's packet counter attached in its measured windows (a vnetlab that had not yet moved the counter to a proof sample of its own): its rr/crr rates read about 7-13% low, more on paths of more devices"

// SampleCPU is the /proc/stat and /proc/softirqs delta over one sample.
type SampleCPU struct {
	UserSec    float64 `json:"user_s"` // user + nice
	SystemSec  float64 `json:"system_s"`
	IRQSec     float64 `json:"irq_s"`
	SoftirqSec float64 `json:"softirq_s"`
	IdleSec    float64 `json:"idle_s"` // idle + iowait
	StealSec   float64 `json:"steal_s,omitempty"`
	NetRx      uint64  `json:"net_rx"`
	NetTx      uint64  `json:"net_tx"`
	WallSec    float64 `json:"wall_s"`
	// Window says what the counters cover: "client" (the engine reported
	// its client's run) or "run" (the whole engine run, server start included).
	Window string `json:"window"`
}

// BusySec is user + system + irq + softirq.
func (c *SampleCPU) BusySec() float64 { return c.UserSec + c.SystemSec + c.IRQSec + c.SoftirqSec }

// Add adds o's time and counts to c (the nodes of a remote cluster's cell:
// separate machines, so their CPU adds up); the wall time is the longer.
func (c *SampleCPU) Add(o *SampleCPU) {
	c.UserSec += o.UserSec
	c.SystemSec += o.SystemSec
	c.IRQSec += o.IRQSec
	c.SoftirqSec += o.SoftirqSec
	c.IdleSec += o.IdleSec
	c.StealSec += o.StealSec
	c.NetRx += o.NetRx
	c.NetTx += o.NetTx
	c.WallSec = max(c.WallSec, o.WallSec)
}

// Baseline is the mode label every cell is compared with: baseline when
// given (--baseline), else the first cell's mode (the first mode of the run
// that ran).
func Baseline(cells []*Cell, baseline string) string {
	if baseline == "" && len(cells) > 0 {
		return cells[0].Mode
	}
	return baseline
}

// ExpectedToFail says the run predicted this cell would fail: Note holds
// why (the kernel dictates it, e.g. iptables on a bridge with
// bridge_nf_call_iptables=off).
func (c *Cell) ExpectedToFail() bool { return c.Note != "" }

// Comparisons are the cell's comparisons, with its baseline cell and its
// pod cell (either nil when it has none).
func (c *Cell) Comparisons() [2]*Comparison { return [2]*Comparison{c.VsBaseline, c.VsPod} }

// Values returns the values of valid samples; none when a knob of the
// cell is not applied (its samples, if any, are not the knob's).
func (c *Cell) Values() []float64 {
	if c.NotApplied != "" {
		return nil
	}
	var v []float64
	for _, s := range c.Samples {
		if s.Valid {
			v = append(v, s.Value)
		}
	}
	return v
}

// Write writes the file as indented JSON.
func Write(path string, f *File) error { return writeJSON(path, f) }

// writeJSON writes v to path as indented JSON, a newline after it: every
// file vnetlab writes its results in.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read loads and checks a results file.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse checks and reads a results file's bytes, of any schema version up
// to SchemaVersion (path names it in errors).
func Parse(path string, b []byte) (*File, error) {
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: not a vnetlab results file: %w", path, err)
	}
	if f.SchemaVersion < 1 || f.SchemaVersion > SchemaVersion {
		return nil, fmt.Errorf("%s: schema_version %d is not supported (this vnetlab reads up to %d)", path, f.SchemaVersion, SchemaVersion)
	}
	if err := f.checkNulls(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if f.Metadata.Cluster != nil {
		f.Metadata.Cluster.upgrade()
	}
	for i := range f.Metadata.Clusters {
		f.Metadata.Clusters[i].upgrade()
	}
	return &f, nil
}

// checkNulls refuses a null where every reader takes a value: a cell, or
// a node's CPU in a sample or a cell's cost.
func (f *File) checkNulls() error {
	for i, c := range f.Cells {
		if c == nil {
			return fmt.Errorf("cells[%d] is null", i)
		}
		samples := c.Samples
		if c.ProofSample != nil {
			samples = append(slices.Clone(samples), *c.ProofSample)
		}
		for j, s := range samples {
			for n, v := range s.NodeCPU {
				if v == nil {
					return fmt.Errorf("cells[%d] sample %d: node_cpu %q is null", i, j, n)
				}
			}
		}
		if c.CPU != nil {
			for n, v := range c.CPU.Nodes {
				if v == nil {
					return fmt.Errorf("cells[%d] cpu: nodes %q is null", i, n)
				}
			}
		}
	}
	return nil
}

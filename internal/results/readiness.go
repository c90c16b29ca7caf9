package results

// ReadinessRun is `kube readiness`'s result: pod network readiness, per
// cluster and burst size each pod's time from its creation to its first
// packet (µs, as Convergence's latencies), the clusters measured in the
// same rounds.
type ReadinessRun struct {
	// LoadBefore and LoadAfter are the machine's load average around the run.
	LoadBefore string      `json:"load_before"`
	LoadAfter  string      `json:"load_after"`
	IntervalUS float64     `json:"interval_us"`
	Clusters   []Readiness `json:"clusters"`
	// Comparisons set each cluster after the first beside the first, per
	// burst size, round by round (analysis.Readiness).
	Comparisons []ReadinessComparison `json:"comparisons,omitempty"`
}

// Readiness is one cluster's bursts.
type Readiness struct {
	Name    string   `json:"name"` // the local cluster's, or the kubeconfig's context
	Cluster *Cluster `json:"cluster"`
	Bursts  []Burst  `json:"bursts"`
}

// ReadinessComparison is one cluster's first-packet time against the
// first cluster's at one burst size: the ratio of the rounds' medians,
// paired by round (lower is better).
type ReadinessComparison struct {
	Cluster string     `json:"cluster"`
	Base    string     `json:"base"`
	Pods    int        `json:"pods"`
	Ratio   float64    `json:"ratio"`
	RatioCI [2]float64 `json:"ratio_ci,omitzero"`
	P       float64    `json:"p,omitempty"`
	Verdict string     `json:"verdict"`
	Rounds  int        `json:"rounds"`
	Note    string     `json:"note,omitempty"`
}

// Burst is one burst size's rounds and their summary.
type Burst struct {
	Pods   int     `json:"pods"`
	Rounds []Round `json:"rounds"`
	// P50, P90 and P99 are the quantiles of every pod's time to its first
	// packet over all rounds, with bootstrap 95% CIs (analysis.Readiness).
	P50   QuantileCI `json:"first_packet_p50_us"`
	P90   QuantileCI `json:"first_packet_p90_us"`
	P99   QuantileCI `json:"first_packet_p99_us"`
	MaxUS float64    `json:"first_packet_max_us"`
	// Last is the median over rounds of the time from the burst's first
	// creation to its last pod's first packet.
	Last QuantileCI `json:"last_pod_p50_us"`
}

// Round is one burst: each pod's time from just before its creation call
// to its first datagram at the listener (µs), in creation order.
type Round struct {
	FirstPacketUS []float64 `json:"first_packet_us"`
	LastUS        float64   `json:"last_pod_us"`
}

// WriteReadiness writes `kube readiness`'s run to path as indented JSON.
func WriteReadiness(path string, r *ReadinessRun) error { return writeJSON(path, r) }

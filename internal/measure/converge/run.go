package converge

import "time"

// Run is what one run measured, in this package's own types: the changes
// written and what each node made of them, what the probers saw, the
// machine's other work beside them and, on a cluster, what its writer
// measured besides. internal/runner files it as a convergence file
// (runner.ConvergenceOf, which adds its rows).
type Run struct {
	Proxy string // what applied the changes: a cluster's Service proxy, a lab's provider
	// A lab's policy apply latency (policy converge), or a cluster's
	// (kube converge --policy): the enforcer, and the generated policies
	// and ipBlocks present.
	PolicyProvider string
	Policies       int
	IPBlocks       int
	Start, End     time.Time
	IntervalUS     int64  // between a prober's probes: the latencies' resolution
	Pause          string // the pause after each change, as --pause takes it (FormatPause)
	// ProbeConntrackTimeoutS: the conntrack timeout the probers' own UDP
	// flows had on the nodes (LimitFlows); 0: the kernel's.
	ProbeConntrackTimeoutS int
	Changes                []Change
	Transitions            []Transition // every node's, node by node, each in send order
	// What a cluster's run measured besides (nil elsewhere): its proxies'
	// syncs by node, the background of other Services, tcp_crr to the
	// newest Service, the EndpointSlice controller's changes.
	ProxySyncs map[string]ProxySyncs
	Scale      *Scale
	CRR        *NewestCRR
	Controller *ControllerChanges
	OtherWork  *OtherWork // the machine's other processes beside the changes
}

// NewRun is a run's results with this pace, starting now.
func (p Pace) NewRun() *Run {
	return &Run{Start: time.Now(), IntervalUS: p.Interval.Microseconds(), Pause: FormatPause(p.PauseMin, p.PauseMax)}
}

// Change is one change written and what each node made of it.
type Change struct {
	Seq     int
	Kind    string
	Target  string // the probed address (IP:port)
	Written int64  // Unix ns, just before the write's call
	WriteUS int64  // how long the write's call took (0: not timed)
	Shows   string // the answer that shows it (a backend's name, ShowsAny, ShowsNone, Gone)
	// By Pair, from the probers' transitions: the latency on each node
	// that showed it (µs from Written), the nodes that did not in time,
	// those whose probes showed it before its write (ShownBefore), and
	// what became of each node's kept connections (Fates).
	LatencyUS   map[string]int64
	NotApplied  []string
	ShownBefore []string
	Conns       map[string][]ConnFate
	// MetricUS, by node: the proxy's own network programming duration
	// for this change, where it reported one (a cluster's writer scrapes
	// it, Hooks.Observed).
	MetricUS map[string]int64
}

// ConnFate is one connection held open at a change's write (Fates).
type ConnFate struct {
	Backend string
	Gone    bool   // the change took its backend out
	Broken  bool   // it broke before the next change's write
	AfterUS int64  // from the write to the first line it did not answer
	Detail  string // reset, timeout, closed, answered by another
	StallUS int64  // not broken, its longest late answer
}

// Transition is a prober's line: a change of what its probes of Target saw
// (Answer, from the probe sent at Sent), or a kept connection's event
// (Event: EventOpen, EventBroken, EventStalled; Answer its backend), or a
// held line (EventHeld, which Seen keeps apart). `vnetlab kube probe`
// writes them as JSON, one a line.
type Transition struct {
	Node    string `json:"node"`
	Target  string `json:"target"`
	Sent    int64  `json:"sent"`
	Seq     uint64 `json:"seq"`
	Answer  string `json:"answer"`
	Event   string `json:"event,omitempty"`
	Detail  string `json:"detail,omitempty"`
	StallUS int64  `json:"stall_us,omitempty"` // a stalled connection's line: how long its answer took
}

// OtherWork is what the machine's other processes used beside a run
// (OtherMeter): CPU seconds by phase (results.Phase*), the changes
// phase's samples, how long the readings took, and the busiest names.
type OtherWork struct {
	Phases      map[string]float64
	Samples     []OtherWorkSample
	ReadSeconds float64
	Top         []NamedCPU
}

// OtherWorkSample is the other work's CPU seconds in one interval (Unix ns).
type OtherWorkSample struct {
	Start      int64
	End        int64
	CPUSeconds float64
}

// NamedCPU is the CPU seconds of the processes of one name.
type NamedCPU struct {
	Name       string
	CPUSeconds float64
}

// ControllerChanges are the EndpointSlice controller's changes, timed
// apart: each seen change's latency (µs, from the pod's write to its
// slice's watch event) and how many showed no slice in time.
type ControllerChanges struct {
	LatencyUS  []int64
	NotApplied int
}

// NewestCRR is tcp_crr to the newest Service: each sample's connections
// per second (one client), the samples' length, and the client's and
// server's CPUs (cpupin.Pins.String).
type NewestCRR struct {
	Target  string
	Seconds float64
	Rates   []float64
	Pins    string
}

// Scale is the background of a cluster's run: the other Services present
// (each with Endpoints endpoints, Reused of them kept from an earlier run),
// what making them took, the API server's and etcd's memory per Service,
// the eBPF maps' memory (in all and by part, results.MapPart*), and the
// daemons' use per phase.
type Scale struct {
	Services           int
	Endpoints          int
	Reused             int
	CreateSeconds      float64
	APIBytesPerService float64
	BPFMapBytes        int64
	BPFMapParts        map[string]int64
	Use                []DaemonUse
}

// DaemonUse is one daemon's use in one phase (results.Phase*): the
// phase's length, its CPU, its resident memory at the end and the largest
// seen.
type DaemonUse struct {
	Daemon     string
	Phase      string
	Seconds    float64
	CPUSeconds float64
	RSS        int64
	PeakRSS    int64
}

// ProxySyncs is how many syncs a node's proxy reported in the run and
// their mean, its conntrack reconciler's runs and their mean, and the
// node's conntrack entries after the changes.
type ProxySyncs struct {
	Syncs            int
	MeanUS           float64
	Reconciles       int
	ReconcileMeanUS  float64
	ConntrackEntries int64
}

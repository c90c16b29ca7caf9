package analysis

import (
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results"
)

// A cluster run's tolerance (kube run --tolerance R, k8s-netperf's check):
// the pod path may fall below the node-to-node host path, but not
// significantly by more than R. Significance is the two-sided Mann-Whitney
// test at p < 0.05 (Compare's verdict "worse") and the bootstrap 95% CI of
// pod/host lying wholly below 1-R (Judge against ">= 1-R" says SHORT):
// a noisy point estimate below 1-R fails nothing.

// Paths a tolerance check pairs (measure.PathPod and PathHost: analysis
// sits below the kube packages).
const (
	tolerancePod  = "pod"
	toleranceHost = "host"
)

// ValidateTolerance refuses a ratio outside (0, 1).
func ValidateTolerance(r float64) error {
	if !(r > 0 && r < 1) {
		return fmt.Errorf("--tolerance %g: want a ratio between 0 and 1 (0.1: the pod path may be up to 10%% below host)", r)
	}
	return nil
}

// HostCheck is one pod cell against the host cell of the same
// configuration, placement and test, under a tolerance.
type HostCheck struct {
	Pod, Host  results.CellID
	Unit       string
	Tolerance  float64
	Comparison // pod against host (Ratio = median pod / median host)
	// Perf is the ratio in the better direction (pod/host for rates,
	// host/pod for times): 1-Tolerance is its floor.
	Perf, PerfLo, PerfHi float64
	Outcome              Outcome // Short: significantly below the floor (the run fails)
}

// HostChecks pairs every pod cell with its host cell (same mode,
// placement, test, no extra Services) and judges each; cells without a
// host cell are not checked.
func HostChecks(cells []*results.Cell, tolerance float64) []HostCheck {
	host := map[results.CellID]*results.Cell{}
	for _, c := range cells {
		if c.Path == toleranceHost {
			host[c.ID()] = c
		}
	}
	var out []HostCheck
	for _, c := range cells {
		if c.Path != tolerancePod {
			continue
		}
		id := c.ID()
		id.Path = toleranceHost
		h := host[id]
		if h == nil {
			continue
		}
		out = append(out, JudgeHost(c, h, tolerance))
	}
	return out
}

// JudgeHost judges pod against host under tolerance.
func JudgeHost(pod, host *results.Cell, tolerance float64) HostCheck {
	higher := HigherIsBetter(pod.Unit)
	hc := HostCheck{Pod: pod.ID(), Host: host.ID(), Unit: pod.Unit, Tolerance: tolerance,
		Comparison: CompareCells(pod, host, higher)}
	hc.Perf, hc.PerfLo, hc.PerfHi = hc.Ratio, hc.RatioCI[0], hc.RatioCI[1]
	if !higher && hc.Ratio > 0 && hc.RatioCI[0] > 0 {
		hc.Perf, hc.PerfLo, hc.PerfHi = 1/hc.Ratio, 1/hc.RatioCI[1], 1/hc.RatioCI[0]
	}
	hc.Outcome = Judge(hc.Perf, [2]float64{hc.PerfLo, hc.PerfHi}, hc.HasCI, Target{Value: 1 - tolerance})
	if hc.Outcome == Short && hc.Verdict != Worse {
		hc.Outcome = Unresolved // the interval alone is not enough: Mann-Whitney must agree
	}
	return hc
}

// String is one line: "k/pod@cross-node/tcp_stream vs host: 0.62 [0.58, 0.66] of host, p=0.008, floor 0.90: SHORT".
func (h HostCheck) String() string {
	ci := "no CI"
	if h.HasCI {
		ci = fmt.Sprintf("[%.3f, %.3f]", h.PerfLo, h.PerfHi)
	}
	p := "no p"
	if h.Note == "" {
		p = fmt.Sprintf("p=%.3f", h.P)
	}
	return fmt.Sprintf("%s vs host: %.3f %s of host, %s, floor %.2f: %s", h.Pod, h.Perf, ci, p, 1-h.Tolerance, h.Outcome)
}

// ToleranceError is the one-line error of the checks that failed (nil
// when none did).
func ToleranceError(checks []HostCheck) error {
	var short []string
	for _, h := range checks {
		if h.Outcome == Short {
			short = append(short, fmt.Sprintf("%s at %.3f [%.3f, %.3f] of host", h.Pod, h.Perf, h.PerfLo, h.PerfHi))
		}
	}
	if len(short) == 0 {
		return nil
	}
	return fmt.Errorf("tolerance %g: the pod path is significantly below host by more than %g%% (p < 0.05, whole 95%% CI under %.2f): %s",
		checks[0].Tolerance, checks[0].Tolerance*100, 1-checks[0].Tolerance, strings.Join(short, "; "))
}

package analysis

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// kubeCell is a cluster cell of path at cross-node with these values.
func kubeCell(path, unit string, vals ...float64) *results.Cell {
	c := cellOf("k", vals...)
	c.Path, c.Placement, c.Unit = path, "cross-node", unit
	return c
}

// The decision on crafted samples: significantly below the floor fails;
// below it by the point estimate only (noise, or too few samples) does not;
// within the tolerance passes; a latency unit turns the ratio round.
func TestToleranceDecision(t *testing.T) {
	host := []float64{10, 10.2, 9.9, 10.1, 10, 9.8}
	for _, tc := range []struct {
		name string
		pod  []float64
		unit string
		tol  float64
		want Outcome
	}{
		{"pod 60% of host, tolerance 10%", []float64{6, 6.1, 5.9, 6.2, 6, 5.8}, "Gbit/s", 0.1, Short},
		{"pod 60% of host, tolerance 50%", []float64{6, 6.1, 5.9, 6.2, 6, 5.8}, "Gbit/s", 0.5, Met},
		{"pod 97% of host, tolerance 10%", []float64{9.7, 9.8, 9.6, 9.9, 9.7, 9.5}, "Gbit/s", 0.1, Met},
		{"pod noisily below: median 80% but spread over host", []float64{3, 16, 4, 15, 8, 12}, "Gbit/s", 0.1, Unresolved},
		{"pod far below but 2 samples: Mann-Whitney cannot say", []float64{5, 5.1}, "Gbit/s", 0.1, Unresolved},
		// Latency: lower is better; pod at 2x host's latency is 0.5 of host.
		{"pod latency twice host's, tolerance 10%", []float64{20, 20.5, 19.8, 20.2, 20, 19.9}, "us", 0.1, Short},
		{"pod latency 5% above host's, tolerance 10%", []float64{10.5, 10.6, 10.4, 10.5, 10.4, 10.3}, "us", 0.1, Met},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, h := kubeCell("pod", tc.unit, tc.pod...), kubeCell("host", tc.unit, host...)
			svc := kubeCell("service", tc.unit, 1, 1, 1, 1)
			checks := HostChecks([]*results.Cell{pod, h, svc}, tc.tol)
			if len(checks) != 1 {
				t.Fatalf("%d checks, want 1 (the pod cell; service cells are not checked)", len(checks))
			}
			hc := checks[0]
			if hc.Outcome != tc.want {
				t.Fatalf("outcome %v, want %v: %s", hc.Outcome, tc.want, hc)
			}
			err := ToleranceError(checks)
			if (err != nil) != (tc.want == Short) {
				t.Fatalf("error %v with outcome %v", err, hc.Outcome)
			}
			if err != nil && (strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "k/pod@cross-node/tcp_stream")) {
				t.Errorf("error is not one line naming the cell: %q", err)
			}
			if hc.HasCI && (hc.PerfLo > hc.Perf || hc.PerfHi < hc.Perf) {
				t.Errorf("interval [%g, %g] does not hold %g", hc.PerfLo, hc.PerfHi, hc.Perf)
			}
		})
	}
}

// A pod cell without a host cell of its placement and test is not checked.
func TestToleranceNeedsTheHostCell(t *testing.T) {
	pod := kubeCell("pod", "Gbit/s", 1, 1, 1, 1)
	host := kubeCell("host", "Gbit/s", 10, 10, 10, 10)
	host.Placement = "same-node"
	if n := len(HostChecks([]*results.Cell{pod, host}, 0.1)); n != 0 {
		t.Fatalf("%d checks of a pod cell without its host cell", n)
	}
}

func TestValidateTolerance(t *testing.T) {
	for _, r := range []float64{0, -0.1, 1, 1.5} {
		if err := ValidateTolerance(r); err == nil || !strings.Contains(err.Error(), "between 0 and 1") {
			t.Errorf("%g: %v", r, err)
		}
	}
	for _, r := range []float64{0.01, 0.5, 0.99} {
		if err := ValidateTolerance(r); err != nil {
			t.Errorf("%g: %v", r, err)
		}
	}
}

package runner

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
)

// fakePath is an engine whose path answers max/s closed-loop (the
// calibration samples: 0.9, 1 and 1.1 of it in turn) and any rate it is
// offered; it keeps the rates it was asked for.
type fakePath struct {
	max   float64
	mu    sync.Mutex
	asked []string
}

func (f *fakePath) Name() string                { return "fake" }
func (f *fakePath) Supports(t engine.Test) bool { return t.RequestResponse() }
func (f *fakePath) Run(_ context.Context, _ engine.Target, s engine.Spec) (engine.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, s.Rate)
	if s.Rate == engine.ClosedLoop {
		n := 0
		for _, r := range f.asked {
			if r == engine.ClosedLoop {
				n++
			}
		}
		return engine.Result{Value: f.max * []float64{0.9, 1, 1.1}[(n-1)%3]}, nil
	}
	r, err := strconv.ParseFloat(s.Rate, 64)
	if err != nil {
		return engine.Result{}, err
	}
	return engine.Result{Value: r, Schedule: &engine.Schedule{Offered: r, Flows: 1, Scheduled: 1, Sent: 1}}, nil
}

// Shares of a path's maximum, without a lab: the path is
// measured closed-loop 3 times before the rounds, once for all its shares;
// each cell records the median and offers its share of it; a share beyond
// the engine's 50000/s fails its cell's samples without running them.
func TestCalibrateShares(t *testing.T) {
	for _, tc := range []struct {
		max      float64
		wantFail string // the 50% cell's error, "" when it runs
	}{{20000, ""}, {150000, "50% of the path's 150000/s is 75000/s"}} {
		spec := DefaultSpec()
		spec.Tests, spec.Repeat, spec.Duration = []engine.Test{engine.TCPRR}, 2, time.Second
		ax, err := knob.ParseAxisFlag("rate=10%,50%,1000")
		if err != nil {
			t.Fatal(err)
		}
		spec.Sweep = knob.Sweep{Axes: []knob.Axis{ax}}
		d := &fakePath{max: tc.max}
		var cells []Planned
		for _, p := range spec.Sweep.Points() {
			c := &results.Cell{Mode: "fake", Path: "pod", Test: string(engine.TCPRR), Point: p.String(), Unit: "trans/s"}
			cells = append(cells, Planned{Cell: c, Driver: d, Target: engine.Target{Addr: "192.0.2.1"}, Test: engine.TCPRR, Point: p})
		}
		if err := Execute(context.Background(), spec, cells, quiet{t}, nil); err != nil {
			t.Fatal(err)
		}
		closed := 0
		for _, r := range d.asked {
			if r == engine.ClosedLoop {
				closed++
			}
		}
		if closed != calibrationSamples {
			t.Errorf("max %g: %d closed-loop samples, want %d (one calibration for both shares)", tc.max, closed, calibrationSamples)
		}
		for _, c := range cells {
			share, isShare := knob.RateShare(strings.TrimPrefix(c.Cell.Point, "rate="))
			m := c.Cell.RateMax
			if !isShare {
				if m != nil || c.Cell.Samples[0].Schedule.Offered != 1000 {
					t.Errorf("%s: rate max %+v, offered %g: want none and 1000", c.Cell.Point, m, c.Cell.Samples[0].Schedule.Offered)
				}
				continue
			}
			if m == nil || m.Max != tc.max || m.Share != share || len(m.ClosedLoop) != calibrationSamples {
				t.Fatalf("%s: rate max %+v, want the median %g of 3 and share %g", c.Cell.Point, m, tc.max, share)
			}
			if share == 0.5 && tc.wantFail != "" {
				s := c.Cell.Samples[0]
				if s.Valid || !strings.Contains(s.Error, tc.wantFail) || !strings.Contains(m.Error, "above 50000/s") {
					t.Errorf("%s of %g: sample %+v, rate max error %q: want it failed with %q", c.Cell.Point, tc.max, s, m.Error, tc.wantFail)
				}
				continue
			}
			if m.Offered != share*tc.max || m.Error != "" {
				t.Errorf("%s: offered %g (%s), want %g", c.Cell.Point, m.Offered, m.Error, share*tc.max)
			}
			for i, s := range c.Cell.Samples {
				if !s.Valid || s.Schedule == nil || s.Schedule.Offered != m.Offered {
					t.Errorf("%s sample %d: %+v, want %g/s offered", c.Cell.Point, i+1, s, m.Offered)
				}
			}
		}
	}
}

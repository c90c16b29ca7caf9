package runner

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/measure/rrbench"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// A rate given as a share of the path's maximum (rate=50%) is
// made a rate here, per cell: before the rounds, each path (its target,
// test, pinning and other knobs) is measured closed-loop, idle, in
// calibrationSamples samples of the run's duration, outside every measured
// window; their median is its 100%, and each cell at a share of it offers
// that share of the median (results.RateMax, recorded in the cell). Cells
// at several shares of one path share its calibration.

// calibrationSamples is how many closed-loop samples make a path's
// maximum: the median of 3 outlives one disturbed sample.
const calibrationSamples = 3

// calibrate measures the maximum of every path a cell of cells needs and
// records it in the cell (Cell.RateMax).
func calibrate(ctx context.Context, spec Spec, cells []Planned, prog Progress) error {
	done := map[string]*results.RateMax{}
	for _, c := range cells {
		share, ok := knob.RateShare(c.EngineSpec(spec).Rate)
		if !ok {
			continue
		}
		key := calibrationKey(c)
		m, seen := done[key]
		if !seen {
			if err := ctx.Err(); err != nil {
				return err
			}
			m = measureMax(ctx, spec, c, prog)
			done[key] = m
		}
		c.Cell.RateMax = withShare(*m, share)
	}
	return nil
}

// calibrationKey names the path c's maximum is measured on: its cell
// without the rate, at its target.
func calibrationKey(c Planned) string { return pathOf(c).Key() + "@" + c.Target.Addr }

// pathOf is c's cell without the rate's axis in its point.
func pathOf(c Planned) results.CellID {
	id := c.Cell.ID()
	var p knob.Point
	for _, v := range c.Point {
		if _, isRate := (knob.Point{v}).Get(knob.Rate); !isRate {
			p = append(p, v)
		}
	}
	id.Point = p.String()
	return id
}

// measureMax is c's path measured closed-loop and idle, calibrationSamples
// times.
func measureMax(ctx context.Context, spec Spec, c Planned, prog Progress) *results.RateMax {
	es := c.EngineSpec(spec)
	es.Rate, es.Load = engine.ClosedLoop, 0
	m := &results.RateMax{}
	for range calibrationSamples {
		res, err := c.Driver.Run(ctx, c.Target, es)
		if err != nil {
			m.Error = fmt.Sprintf("its closed-loop maximum could not be measured: %v", err)
			prog.Note("warning: %s: %s", c.Cell.ID(), m.Error)
			return m
		}
		m.ClosedLoop = append(m.ClosedLoop, res.Value)
	}
	m.Max = stats.Median(m.ClosedLoop)
	prog.Note("%s: 100%% is %.0f %s (closed loop, median of %d samples)", pathOf(c), m.Max, c.Cell.Unit, calibrationSamples)
	return m
}

// withShare is path maximum m offered at share, refused (Error) when the
// engine cannot schedule that rate.
func withShare(m results.RateMax, share float64) *results.RateMax {
	m.Share = share
	if m.Error != "" {
		return &m
	}
	m.Offered = math.Max(1, math.Round(share*m.Max))
	if err := rrbench.CheckRate(m.Offered); err != nil {
		m.Error = fmt.Sprintf("%g%% of the path's %.0f/s is %.0f/s: %v", 100*share, m.Max, m.Offered, err)
	}
	return &m
}

// rateOf is the rate the engine gets for c: a share of its path's
// maximum made a rate (calibrate), else the spec's own; an error when the
// share could not be made one (the sample fails without running).
func rateOf(c Planned, es engine.Spec) (string, error) {
	if _, ok := knob.RateShare(es.Rate); !ok {
		return es.Rate, nil
	}
	m := c.Cell.RateMax
	switch {
	case m == nil:
		return "", fmt.Errorf("rate %s: the path's closed-loop maximum was not measured", es.Rate)
	case m.Error != "":
		return "", fmt.Errorf("rate %s: %s", es.Rate, m.Error)
	}
	return strconv.FormatFloat(m.Offered, 'f', 0, 64), nil
}

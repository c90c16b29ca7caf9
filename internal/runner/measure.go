package runner

import (
	"context"
	"fmt"

	"github.com/vnetlab/vnetlab/internal/cpu"
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// cpuWindow records CPU snapshots at the marks a driver reports
// (engine.MeasureStart/End): the first start and the last end; and
// samples stacks in between when profiling.
type cpuWindow struct {
	start, end     cpu.Snapshot
	started, ended bool
	prof           *profile.Window // nil: not profiling
	pkts           *packetWindow   // nil: no packet counts
}

func (w *cpuWindow) Start() {
	if w.started {
		return
	}
	if w.prof != nil {
		w.prof.Start()
	}
	if w.pkts != nil {
		w.pkts.Start()
	}
	if s, err := cpu.Take(); err == nil {
		w.start, w.started = s, true
	}
}

func (w *cpuWindow) End() {
	if !w.started {
		return
	}
	if s, err := cpu.Take(); err == nil {
		w.end, w.ended = s, true
	}
	if w.pkts != nil {
		w.pkts.End()
	}
	if w.prof != nil {
		w.prof.End()
	}
}

// measure runs one sample and what it cost the machine. The CPU window is
// the driver's client run when the driver reports it, else the whole Run
// (server start and stop included: a few ms of CPU per sample, the same for
// every mode). usage is nil only when /proc could not be read. With col,
// the window's profile too (nil when the driver reported no window),
// counting the namespaces netns as the test's. With pkts, the window's
// packet counts are left in pkts.delta.
func measure(ctx context.Context, d engine.Driver, tg engine.Target, spec engine.Spec, col *profile.Collector, netns []string, pkts *packetWindow) (engine.Result, *results.SampleCPU, *profile.Profile, error) {
	w := &cpuWindow{pkts: pkts}
	if col != nil {
		w.prof = col.Window(netns...)
	}
	before, berr := cpu.Take()
	res, err := d.Run(engine.WithWindow(ctx, w), tg, spec)
	after, aerr := cpu.Take()
	var prof *profile.Profile
	if w.prof != nil {
		var perr error
		if prof, perr = w.prof.Profile(); perr != nil && err == nil {
			err = fmt.Errorf("profile: %w", perr)
		}
	}
	var delta cpu.Delta
	var window string
	switch {
	case w.started && w.ended:
		delta, window = w.end.Sub(w.start), "client"
	case berr == nil && aerr == nil:
		delta, window = after.Sub(before), "run"
	default:
		return res, nil, prof, err
	}
	return res, &results.SampleCPU{
		UserSec: delta.UserSec, SystemSec: delta.SystemSec, IRQSec: delta.IRQSec,
		SoftirqSec: delta.SoftirqSec, IdleSec: delta.IdleSec, StealSec: delta.StealSec,
		NetRx: delta.NetRx, NetTx: delta.NetTx, WallSec: delta.Wall.Seconds(), Window: window,
	}, prof, err
}

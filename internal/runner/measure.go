package runner

import (
	"context"

	"github.com/vnetlab/vnetlab/internal/cpu"
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/results"
)

// cpuWindow records CPU snapshots at the marks a driver reports
// (engine.MeasureStart/End): the first start and the last end.
type cpuWindow struct {
	start, end     cpu.Snapshot
	started, ended bool
}

func (w *cpuWindow) Start() {
	if w.started {
		return
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
}

// measure runs one sample and what it cost the machine. The CPU window is
// the driver's client run when the driver reports it, else the whole Run
// (server start and stop included: a few ms of CPU per sample, the same for
// every mode). usage is nil only when /proc could not be read.
func measure(ctx context.Context, d engine.Driver, tg engine.Target, spec engine.Spec) (engine.Result, *results.SampleCPU, error) {
	w := &cpuWindow{}
	before, berr := cpu.Take()
	res, err := d.Run(engine.WithWindow(ctx, w), tg, spec)
	after, aerr := cpu.Take()
	var delta cpu.Delta
	var window string
	switch {
	case w.started && w.ended:
		delta, window = w.end.Sub(w.start), "client"
	case berr == nil && aerr == nil:
		delta, window = after.Sub(before), "run"
	default:
		return res, nil, err
	}
	return res, &results.SampleCPU{
		UserSec: delta.UserSec, SystemSec: delta.SystemSec, IRQSec: delta.IRQSec,
		SoftirqSec: delta.SoftirqSec, IdleSec: delta.IdleSec, StealSec: delta.StealSec,
		NetRx: delta.NetRx, NetTx: delta.NetTx, WallSec: delta.Wall.Seconds(), Window: window,
	}, err
}

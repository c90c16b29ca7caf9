package runner

import (
	"context"
	"fmt"

	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// NodeMeter reads the CPU counters of the Kubernetes nodes a cluster run
// measures (kube run), by node name, at the same marks as this machine's.
type NodeMeter interface {
	Take(ctx context.Context) (map[string]cpu.Snapshot, error)
	// Machine names the machine node runs on, "" for this one. A sample's
	// CPU is this machine's when its client's and server's nodes are all
	// here, else the sum over their distinct machines.
	Machine(node string) string
}

// cpuWindow records CPU snapshots at the marks a driver reports
// (engine.MeasureStart/End): the first start and the last end; and
// samples stacks in between when profiling. With a meter, the nodes'
// counters too.
type cpuWindow struct {
	start, end         cpu.Snapshot
	nodeStart, nodeEnd map[string]cpu.Snapshot
	started, ended     bool
	prof               *profile.Window // nil: not profiling
	pkts               *packetWindow   // nil: no packet counts
	ctx                context.Context
	meter              NodeMeter // nil: no nodes
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
		w.nodeStart = w.takeNodes()
	}
}

func (w *cpuWindow) End() {
	if !w.started {
		return
	}
	if s, err := cpu.Take(); err == nil {
		w.end, w.ended = s, true
		w.nodeEnd = w.takeNodes()
	}
	if w.pkts != nil {
		w.pkts.End()
	}
	if w.prof != nil {
		w.prof.End()
	}
}

// takeNodes reads the nodes' counters (nil without a meter or when they
// cannot be read: the sample then has no per-node CPU).
func (w *cpuWindow) takeNodes() map[string]cpu.Snapshot {
	if w.meter == nil {
		return nil
	}
	s, err := w.meter.Take(w.ctx)
	if err != nil {
		return nil
	}
	return s
}

// measure runs one sample of p and what it cost the machine. The CPU
// window is the driver's client run when the driver reports it, else the
// whole Run (server start and stop included: a few ms of CPU per sample,
// the same for every mode). usage is nil only when /proc could not be read.
// With col, the window's profile too (nil when the driver reported no
// window), counting p's namespaces as the test's. With meter, each node's
// CPU over the same window goes into usage's sample (NodeCPU). With pkts,
// the window's packet counts are left in pkts.delta.
func measure(ctx context.Context, p Planned, spec engine.Spec, col *profile.Collector, meter NodeMeter, pkts *packetWindow) (engine.Result, *results.SampleCPU, map[string]*results.SampleCPU, *profile.Profile, error) {
	w := &cpuWindow{ctx: ctx, meter: meter, pkts: pkts}
	if col != nil {
		w.prof = col.Window(p.NetNS...)
	}
	before, berr := cpu.Take()
	nodesBefore := w.takeNodes()
	res, err := p.Driver.Run(engine.WithWindow(ctx, w), p.Target, spec)
	nodesAfter := w.takeNodes()
	after, aerr := cpu.Take()
	var prof *profile.Profile
	if w.prof != nil {
		var perr error
		if prof, perr = w.prof.Profile(); perr != nil && err == nil {
			err = fmt.Errorf("profile: %w", perr)
		}
	}
	var usage *results.SampleCPU
	window := "client"
	switch {
	case w.started && w.ended:
		usage = sampleCPU(w.end.Sub(w.start), window)
		nodesBefore, nodesAfter = w.nodeStart, w.nodeEnd
	case berr == nil && aerr == nil:
		window = "run"
		usage = sampleCPU(after.Sub(before), window)
	}
	nodes := nodeCPU(nodesBefore, nodesAfter, window)
	if meter != nil && (meter.Machine(p.Cell.ClientNode) != "" || meter.Machine(p.Cell.ServerNode) != "") {
		usage = cellCPU(nodes, meter, p.Cell.ClientNode, p.Cell.ServerNode)
	}
	return res, usage, nodes, prof, err
}

// sampleCPU is a delta as a sample records it.
func sampleCPU(d cpu.Delta, window string) *results.SampleCPU {
	return &results.SampleCPU{
		UserSec: d.UserSec, SystemSec: d.SystemSec, IRQSec: d.IRQSec,
		SoftirqSec: d.SoftirqSec, IdleSec: d.IdleSec, StealSec: d.StealSec,
		NetRx: d.NetRx, NetTx: d.NetTx, WallSec: d.Wall.Seconds(), Window: window,
	}
}

// nodeCPU is each node's delta between two readings (nil when either is
// missing: a sample gets all its nodes or none).
func nodeCPU(before, after map[string]cpu.Snapshot, window string) map[string]*results.SampleCPU {
	if before == nil || after == nil {
		return nil
	}
	out := map[string]*results.SampleCPU{}
	for n, a := range after {
		if b, ok := before[n]; ok {
			out[n] = sampleCPU(a.Sub(b), window)
		}
	}
	return out
}

// cellCPU is the CPU of a cell on other machines: its client's node's plus
// its server's, each machine once; nil when either node's is missing.
func cellCPU(nodes map[string]*results.SampleCPU, meter NodeMeter, client, server string) *results.SampleCPU {
	sum := &results.SampleCPU{}
	seen := map[string]bool{}
	for _, n := range []string{client, server} {
		c := nodes[n]
		if c == nil {
			return nil
		}
		if m := meter.Machine(n); !seen[m] {
			seen[m] = true
			sum.Add(c)
			sum.Window = c.Window
		}
	}
	return sum
}

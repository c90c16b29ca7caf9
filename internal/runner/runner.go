// Package runner runs a measurement matrix: it plans the run (one lab per
// mode, and per provider for the service path; a cell per path and test),
// executes every cell in interleaved rounds, and tears the labs down
// whatever happens.
package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/vnetlab/vnetlab/internal/analysis"
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/field"
	"github.com/vnetlab/vnetlab/internal/pktstat"
	"github.com/vnetlab/vnetlab/internal/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// Progress is told about each step; Sample is called before each sample.
type Progress interface {
	Begin(total int)
	Sample(i int, label string)
	Note(format string, args ...any)
	End()
}

// Run executes spec and returns the filled results: the metadata (Begin:
// this machine, prov, the settings, the modes skipped), the cells and
// their statistics.
func Run(ctx context.Context, spec Spec, prov Provenance, prog Progress) (*results.File, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	p, err := newPlan(spec, prog)
	if err != nil {
		return nil, err
	}
	p.out.Metadata = Begin(prov, spec)
	if e := p.out.Metadata.Emulation; e != "" {
		prog.Note("warning: %s", e)
	}
	defer func() { p.out.Metadata.End = time.Now().UTC() }()
	defer p.teardown()
	if err := p.build(ctx); err != nil {
		return p.out, err
	}
	spec.Summary.Baseline = results.Baseline(p.out.Cells, spec.Summary.Baseline)
	p.out.Metadata.Settings = spec.settings()
	if err := p.runnable(); err != nil {
		return p.out, err
	}
	pkts := openPackets(p)
	if pkts != nil {
		defer pkts.Close()
	}
	return p.out, measureCells(ctx, spec, p.cells, p.out.Cells, prog, nil, pkts)
}

// runnable refuses a plan with no cell left to measure.
func (p *plan) runnable() error {
	if len(p.cells) == 0 && len(p.spec.Cells) > 0 {
		return field.Errorf("cells", "nothing to run: no cell of the matrix matches {cells} %v (names look like veth-routed/service(ebpf+10000)/tcp_crr)", p.spec.Cells)
	}
	if len(p.cells) == 0 {
		return fmt.Errorf("nothing to run: every mode was skipped")
	}
	return nil
}

// Labs are a run's labs, up, with the cells planned on them, for a run
// that executes them beside cells of its own (kube run's lab beside its
// cluster: one Execute over both); Close tears the labs down.
type Labs struct{ p *plan }

// Prepare brings up spec's labs and plans their cells; on error nothing
// is left up.
func Prepare(ctx context.Context, spec Spec, prog Progress) (*Labs, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	p, err := newPlan(spec, prog)
	if err != nil {
		return nil, err
	}
	err = p.build(ctx)
	if err == nil {
		err = p.runnable()
	}
	if err != nil {
		p.teardown()
		return nil, err
	}
	return &Labs{p: p}, nil
}

// Cells are the planned cells, in the order a lab run measures them.
func (l *Labs) Cells() []Planned { return l.p.cells }

// Skipped are the modes (and providers) the labs could not build.
func (l *Labs) Skipped() []results.Skipped { return l.p.out.Metadata.Skipped }

// Close tears the labs down.
func (l *Labs) Close() { l.p.teardown() }

// Planned is one cell ready to measure: where (Target), with what (Driver),
// and which namespaces a profile counts as the test's (NetNS; nil: none).
type Planned struct {
	Cell   *results.Cell
	Target engine.Target
	Driver engine.Driver
	NetNS  []string
}

// Execute measures cells planned elsewhere (Spec.Plan on the pods of `vnetlab
// kube run`) in the same interleaved rounds as a lab run, then computes the
// statistics; with meter (nil: none), each sample records its nodes' CPU.
// With spec.Profile, each cell is profiled as a lab run's is: the cells'
// NetNS (nil: every namespace but the root one, a local cluster's nodes and
// pods) count as the test's.
func Execute(ctx context.Context, spec Spec, cells []Planned, prog Progress, meter NodeMeter) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	var all []*results.Cell
	for _, c := range cells {
		all = append(all, c.Cell)
	}
	return measureCells(ctx, spec, cells, all, prog, meter, nil)
}

// measureCells is what Run and Execute both do once the cells are planned:
// execute them (profiled with spec.Profile), then compute the statistics
// of all and, profiled, their profiles.
func measureCells(ctx context.Context, spec Spec, cells []Planned, all []*results.Cell, prog Progress, meter NodeMeter, pc *pktstat.Counter) error {
	col, err := openProfiler(spec)
	if err != nil {
		return err
	}
	if col != nil {
		defer col.Close()
	}
	if err := execute(ctx, spec, cells, prog, col, meter, pc); err != nil {
		return err
	}
	analysis.Analyze(all, spec.Summary)
	if col != nil {
		return finishProfiles(col, all, spec.ProfileDir)
	}
	return nil
}

// execute runs Warmup + Repeat rounds, each one sample of every cell in
// turn (A B C A B C ...), so that slow drifts of the machine touch every
// cell alike; warm-up samples are discarded. With col, each valid sample's
// measured window is profiled into its cell's profile; with meter, each
// sample records its nodes' CPU; with pc, its packets are counted into its
// cell's packet proof.
func execute(ctx context.Context, spec Spec, cells []Planned, prog Progress, col *profile.Collector, meter NodeMeter, pc *pktstat.Counter) error {
	rounds := spec.Warmup + spec.Repeat
	for _, c := range cells {
		if p := spec.pins(engine.Test(c.Cell.Test)); p.Pinned {
			c.Cell.CPUAffinity = &results.CPUAffinity{Client: p.Client, Server: p.Server}
		}
	}
	prog.Begin(rounds * len(cells))
	defer prog.End()
	totals := packetTotals{}
	defer totals.prove(cells, spec)
	n := 0
	for r := 0; r < rounds; r++ {
		for _, c := range cells {
			if err := ctx.Err(); err != nil {
				return err
			}
			n++
			label := c.Cell.ID().String()
			if r < spec.Warmup {
				label += " (warmup)"
			}
			prog.Sample(n, label)
			start := time.Now().UTC()
			sampler := col
			if r < spec.Warmup {
				sampler = nil
			}
			var pw *packetWindow
			if pc != nil {
				pw = &packetWindow{c: pc}
			}
			m := meter
			if c.Cell.ClientNode == "" && c.Cell.ServerNode == "" {
				m = nil // a lab's cell beside a cluster's: the meter's nodes are not its own
			}
			res, usage, nodes, prof, err := measure(ctx, c, spec.engineSpec(c.Cell.ID()), sampler, m, pw)
			if r < spec.Warmup {
				continue
			}
			if err == nil && pw != nil {
				totals.add(c.Cell, pw.delta)
			}
			if err == nil && col != nil {
				col.Add(c.Cell.ID().Key(), prof, workUnits(res, c.Cell.Unit))
			}
			s := results.Sample{Result: res, Valid: err == nil, Start: start, CPU: usage, NodeCPU: nodes}
			if err != nil {
				s.Error = err.Error()
				prog.Note("sample failed: %s: %v", c.Cell.ID(), err)
			}
			c.Cell.Samples = append(c.Cell.Samples, s)
		}
	}
	return nil
}

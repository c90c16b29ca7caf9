// Package runner runs a measurement matrix: it plans the run (one lab per
// mode, and per provider for the service path; a cell per path and test),
// executes every cell in interleaved rounds, and tears the labs down
// whatever happens.
package runner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/measure/pktstat"
	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
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
	spec.OrderSeed = spec.DrawnOrderSeed()
	p, err := newPlan(spec, prog)
	if err != nil {
		return nil, err
	}
	p.out = Begin(prov, spec)
	if e := p.out.Metadata.Emulation; e != "" {
		prog.Note("warning: %s", e)
	}
	defer func() { p.out.Metadata.End = time.Now().UTC() }()
	defer p.teardown()
	if err := p.build(ctx); err != nil {
		return p.out, err
	}
	spec.Summary.Baseline = results.Baseline(p.out.Cells, spec.Summary.Baseline)
	if spec.Duet {
		for _, c := range p.cells {
			c.Cell.Placement = results.PlacementDuet
		}
	}
	p.out.Metadata.Settings = spec.settings()
	if err := p.runnable(); err != nil {
		return p.out, err
	}
	looks, err := measureCells(ctx, spec, p.cells, p.out.Cells, prog, nil)
	p.out.Metadata.Settings.Looks = looks
	return p.out, err
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
	// The cell's coordinates the engine needs, typed once when planned.
	Test   engine.Test
	Point  knob.Point
	Family family.Family
	// Policy proves the lab's NetworkPolicies around the cell's proof
	// sample (policies.go: a labpolicy.CellProof; a cluster's:
	// internal/kube/bench/policies.go); nil when the lab has none.
	// ProvePolicies sets it.
	Policy PolicyProver
}

// PolicyProver proves a cell's policy set in force around its proof
// sample: Begin before it (never in a measured window), End after it, each
// "" or why the set is not in force; Seen is what they saw, which the
// runner files in the cell's proof (filing_policy.go).
type PolicyProver interface {
	Begin() string
	End() string
	Seen() labpolicy.CellSeen
}

// ProvePolicies gives c its policy set, loaded in loadSec seconds, to be
// proven by p around its proof sample: a lab's cells (policies.go) and a
// cluster's (internal/kube/bench/policies.go) alike.
func (c *Planned) ProvePolicies(set knob.PolicySet, loadSec float64, p PolicyProver) {
	c.Cell.Policies, c.Policy = policyProofOf(set, loadSec), p
}

// EngineSpec is what one sample of c measures under spec.
func (c Planned) EngineSpec(spec Spec) engine.Spec { return spec.EngineSpec(c.Test, c.Point, c.Family) }

// Execute measures cells planned elsewhere (Spec.Plan on the pods of `vnetlab
// kube run`) in the same rounds as a lab run, then computes the
// statistics; with meter (nil: none), each sample records its nodes' CPU.
// With spec.Profile, each cell is profiled as a lab run's is: the cells'
// NetNS (nil: every namespace but the root one, a local cluster's nodes and
// pods) count as the test's. Cells with NetNS of their own (a lab's) get
// their packet proof as a lab run's do.
func Execute(ctx context.Context, spec Spec, cells []Planned, prog Progress, meter NodeMeter) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	spec.OrderSeed = spec.DrawnOrderSeed()
	_, err := measureCells(ctx, spec, cells, all(cells), prog, meter)
	return err
}

// measureCells is what Run and Execute both do once the cells are planned:
// load the instruments (the packet counter for cells with namespaces of
// their own, the profiler with spec.Profile), execute the rounds, then
// compute the statistics of all and, profiled, their profiles.
func measureCells(ctx context.Context, spec Spec, cells []Planned, all []*results.Cell, prog Progress, meter NodeMeter) ([]int, error) {
	col, err := openProfiler(spec)
	if err != nil {
		return nil, err
	}
	if col != nil {
		defer col.Close()
	}
	pc := openPackets(cells, prog)
	if pc != nil {
		defer pc.Close()
	}
	looks, err := execute(ctx, spec, cells, prog, col, meter, pc)
	if err != nil {
		return looks, err
	}
	spec.Summary.Looks = looks
	analysis.Analyze(all, spec.Summary)
	if col != nil {
		return looks, finishProfiles(col, all, spec.ProfileDir)
	}
	return looks, nil
}

// execute runs the spec's rounds (rounds.go) and returns the measured
// rounds at each look of a precision run (nil for fixed rounds):
// warm-up samples are discarded; a proof sample (pc: the packet counter,
// nil for none) counts its cell's packets into the cell's proof; measured
// samples make the statistics; a profile sample (col: the profiler) goes
// into its cell's profile. With meter, each sample records its nodes' CPU.
func execute(ctx context.Context, spec Spec, cells []Planned, prog Progress, col *profile.Collector, meter NodeMeter, pc *pktstat.Counter) ([]int, error) {
	if p := spec.pins(); p.Pinned && !spec.Duet {
		for _, c := range cells {
			c.Cell.CPUAffinity = &results.CPUAffinity{Client: p.Client, Server: p.Server}
		}
	}
	if err := calibrate(ctx, spec, cells, prog); err != nil {
		return nil, err
	}
	proof := pc != nil || slices.ContainsFunc(cells, func(c Planned) bool { return c.Policy != nil })
	rs := spec.rounds(proof)
	rr := &roundRunner{spec: spec, cells: cells, order: newOrder(spec), prog: prog, col: col, meter: meter, pc: pc}
	if spec.Duet {
		var err error
		if rr.pairs, err = duetPairs(cells, spec.Summary.Baseline); err != nil {
			return nil, err
		}
	}
	prog.Begin(stepsOf(rs, cells, pc))
	defer prog.End()
	for _, r := range rs {
		if err := rr.run(ctx, r); err != nil {
			return nil, err
		}
	}
	if spec.Summary.Precision == 0 {
		return nil, nil
	}
	return rr.untilPrecise(ctx)
}

// stepsOf is how many samples rounds rs take of cells.
func stepsOf(rs []round, cells []Planned, pc *pktstat.Counter) int {
	n := 0
	for _, r := range rs {
		for _, c := range cells {
			if r != proofRound || proves(c, pc) {
				n++
			}
		}
	}
	return n
}

// all are the planned cells' results.
func all(cells []Planned) []*results.Cell {
	out := make([]*results.Cell, 0, len(cells))
	for _, c := range cells {
		out = append(out, c.Cell)
	}
	return out
}

// proves says whether cell c has a proof round: a packet proof (a counter
// is loaded and the cell has namespaces of its own) or a policy proof.
func proves(c Planned, pc *pktstat.Counter) bool { return counts(c, pc) || c.Policy != nil }

// counts says whether cell c's proof sample counts its packets.
func counts(c Planned, pc *pktstat.Counter) bool { return pc != nil && len(c.NetNS) > 0 }

// sample runs one sample of cell c in round r and files it where the
// round says.
func sample(ctx context.Context, spec Spec, c Planned, r round, prog Progress, col *profile.Collector, meter NodeMeter, pc *pktstat.Counter, at place) {
	proof := r.proves() && proves(c, pc)
	var pw *packetWindow
	if proof && counts(c, pc) {
		pw = &packetWindow{c: pc}
		defer pc.Detach()
	}
	var policyWhy string
	if proof && c.Policy != nil {
		policyWhy = c.Policy.Begin() // before the sample's window, never in a measured one
	}
	start := time.Now().UTC()
	sampler := col
	if r != profileRound {
		sampler = nil
	}
	m := meter
	if c.Cell.ClientNode == "" && c.Cell.ServerNode == "" {
		m = nil // a lab's cell beside a cluster's: the meter's nodes are not its own
	}
	es := c.EngineSpec(spec)
	if at.pins != nil {
		es.CPU = *at.pins
	}
	var (
		res   engine.Result
		usage *results.SampleCPU
		nodes map[string]*results.SampleCPU
		prof  *profile.Profile
		err   error
	)
	if es.Rate, err = rateOf(c, es); err == nil { // a share of the path's maximum, made a rate
		res, usage, nodes, prof, err = measure(ctx, c, es, sampler, m, pw)
	}
	if at.pins != nil {
		usage = nil // a duet's two samples share the machine's counters
	}
	s := results.Sample{Result: resultOf(res), Valid: err == nil, Start: start, CPU: usage, NodeCPU: nodes, Round: r.mark()}
	if r == measuredRound {
		s.RoundIndex, s.Slot = at.round, at.slot
	}
	if err != nil {
		s.Error = err.Error()
	}
	switch {
	case r == measuredRound:
		if err != nil {
			prog.Note("sample failed: %s: %v", c.Cell.ID(), err)
		}
		c.Cell.Samples = append(c.Cell.Samples, s)
	case r == profileRound:
		if err != nil {
			prog.Note("profile sample failed: %s: %v", c.Cell.ID(), err)
		} else {
			col.Add(c.Cell.ID().Key(), prof, workUnits(res, c.Cell.Unit))
		}
		c.Cell.ProfileSamples = append(c.Cell.ProfileSamples, s)
	case proof:
		c.Cell.ProofSample = &s
		if c.Policy != nil {
			provePolicies(c, policyWhy, err)
			if why := c.Cell.Policies.NotApplied; why != "" {
				prog.Note("%s: policies not in force, not measured: %s", c.Cell.ID(), why)
			}
		}
		if pw == nil {
			return
		}
		if err != nil {
			prog.Note("proof sample failed: %s: %v (the cell has no packet proof)", c.Cell.ID(), err)
			return
		}
		if pw.err != nil {
			prog.Note("warning: %s: packets not counted: %v", c.Cell.ID(), pw.err)
			return
		}
		spec.prove(c, pw.delta)
	}
}

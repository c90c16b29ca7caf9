package runner

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/results"
)

// plan is what a run measures, once its labs are up: a cell per mode x
// path (x provider x count of extra services) x test, each with its driver
// and the namespaces to run it between. What cannot run is recorded in
// out's Skipped.
type plan struct {
	spec  Spec
	pods  []lab.PodSpec
	runID string
	prog  Progress
	labs  []*lab.Lab
	out   *results.File
	cells []Planned
	// knobs is each lab's knobs as the lab holds them (by lab name).
	knobs map[string]*knob.Proof
	// policies is each lab's policies (by lab name; policies.go).
	policies map[string]*policyLab
}

func newPlan(spec Spec, prog Progress) (*plan, error) {
	pods, err := spec.podSpecs()
	if err != nil {
		return nil, err
	}
	prefix := spec.LabPrefix
	if prefix == "" {
		prefix = "run"
	}
	runID := fmt.Sprintf("%s%04d", prefix, rand.New(rand.NewSource(time.Now().UnixNano()^int64(os.Getpid()))).Intn(10000))
	return &plan{spec: spec, pods: pods, runID: runID, prog: prog, out: &results.File{SchemaVersion: results.SchemaVersion}}, nil
}

// build brings up the labs and lists the cells: per mode, setting of the
// lab knobs and policy set the sweep's points need (knob.Values, knob.PolicySet)
// and policy provider (policies.go), one lab for the pod paths, and one per
// provider and count of extra services for the service path (providers
// cannot share a node: the first to DNAT wins; and each count is a
// different table to search).
func (p *plan) build(ctx context.Context) error {
	var plainPaths []string
	servicePath := false
	for _, path := range p.spec.Paths {
		if path == ServicePath {
			servicePath = true
		} else {
			plainPaths = append(plainPaths, path)
		}
	}
	extras := p.spec.ExtraServices
	if len(extras) == 0 {
		extras = []int{0}
	}
	for _, mv := range p.spec.Modes {
		m, err := modes.Get(mv.Mode)
		if err != nil {
			return err
		}
		if err := modes.Available(m); err != nil {
			p.skip(mv, "", err)
			continue
		}
		for _, pol := range p.spec.policyProviders() {
			if pol != "" {
				if why, _ := labpolicy.SupportsMode(pol, m, mv.Options); why != "" {
					p.skip(mv, "", fmt.Errorf("policy provider %s: %s", pol, why))
					continue
				}
			}
			for _, g := range p.spec.labGroups() {
				if err := p.buildMode(ctx, mv, m, g, pol, plainPaths, servicePath, extras); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// buildMode brings up mode mv's labs for one setting of the links and
// policy set, enforced by policy provider pol ("": none).
func (p *plan) buildMode(ctx context.Context, mv ModeVariant, m modes.Mode, g labGroup, pol string, plainPaths []string, servicePath bool, extras []int) error {
	if p.anyWanted(mv.Label, plainPaths, "", 0, pol, g.Points) {
		l, err := p.upLab(ctx, mv, m, g.Lab)
		if err != nil {
			return err
		}
		if pol != "" {
			// The policies select the first path's server pod (each
			// path's cells prove them for their own flow).
			for _, path := range plainPaths {
				if ep, ok := l.State.Paths[path]; ok {
					if err := p.enforce(l, mv, pol, g.Policy, ep); err != nil {
						p.skip(mv, "", fmt.Errorf("policy provider %s with %s: %w", pol, g.Policy, err))
						return nil
					}
					break
				}
			}
		}
		for _, path := range plainPaths {
			ep, ok := l.State.Paths[path]
			if !ok {
				p.out.Metadata.Skipped = append(p.out.Metadata.Skipped, results.Skipped{Mode: mv.Label, Reason: fmt.Sprintf("mode %s has no path %q (has: %s)", mv.Mode, path, pathNames(l.State.Paths))})
				continue
			}
			if err := p.addCells(mv, l, path, ep, results.Cell{PolicyProvider: pol}, g.Points); err != nil {
				return err
			}
		}
	}
	if !servicePath {
		return nil
	}
	for _, prov := range p.spec.providersFor(m) {
		if err := labservice.Check(prov, m); err != nil {
			p.skip(mv, prov, err)
			continue
		}
		for _, n := range extras {
			if !p.anyWanted(mv.Label, []string{ServicePath}, prov, n, pol, g.Points) {
				continue
			}
			l, err := p.upLab(ctx, mv, m, g.Lab)
			if err != nil {
				return err
			}
			ep, cell, err := loadServices(l, prov, n, p.spec.Services, mv, m, p.prog)
			if err != nil {
				p.skip(mv, prov, err)
				continue
			}
			if pol != "" {
				server, client, err := labservice.Path(l.State)
				if err == nil {
					err = p.enforce(l, mv, pol, g.Policy, modes.Endpoint{ServerNS: server.NS, ClientNS: client.NS})
				}
				if err != nil {
					p.skip(mv, prov, fmt.Errorf("policy provider %s with %s: %w", pol, g.Policy, err))
					continue
				}
				cell.PolicyProvider = pol
			}
			if err := p.addCells(mv, l, ServicePath, ep, cell, g.Points); err != nil {
				return err
			}
		}
	}
	return nil
}

// anyWanted says whether a lab for these paths and points would hold a
// cell the spec measures (Spec.Cells): labs that would hold none are not built.
func (p *plan) anyWanted(mode string, paths []string, provider string, extra int, pol string, points []knob.Point) bool {
	for _, path := range paths {
		for _, t := range p.spec.Tests {
			for _, pt := range points {
				for _, f := range p.spec.Family.Measured() {
					if p.spec.appliesTo(pt, t) && p.spec.Wants(results.CellID{Mode: mode, Path: path, Provider: provider, ExtraServices: extra, PolicyProvider: pol, Point: pt.String(), Family: f.Cell(), Test: string(t)}) {
						return true
					}
				}
			}
		}
	}
	return false
}

// skip records a mode (with a provider) that cannot run, and says so.
func (p *plan) skip(mv ModeVariant, provider string, why error) {
	p.out.Metadata.Skipped = append(p.out.Metadata.Skipped, results.Skipped{Mode: mv.Label, Provider: provider, Reason: why.Error()})
	if provider == "" {
		p.prog.Note("skipping %s: %v", mv.Label, why)
	} else {
		p.prog.Note("skipping %s with %s: %v", mv.Label, provider, why)
	}
}

func (p *plan) upLab(ctx context.Context, mv ModeVariant, m modes.Mode, knobs knob.Values) (*lab.Lab, error) {
	ls := p.spec.labSpec()
	ls.Name, ls.Mode, ls.Pods, ls.Options, ls.Knobs = fmt.Sprintf("%s-%d", p.runID, len(p.labs)), mv.Mode, p.pods, mv.Options, knobs
	what := mv.Label
	if !knobs.IsZero() {
		what += " with " + knobs.String()
	}
	p.prog.Note("bringing up %s (lab %s)", what, ls.Name)
	l, err := lab.Up(ctx, ls, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mv.Label, err)
	}
	p.labs = append(p.labs, l)
	return l, p.proveKnobs(l)
}

// addCells adds the cells of one path of a lab at the sweep's points it
// was built for (Spec.Plan), one set per IP family the lab measures, each
// dialing the path's address of its family; proto carries the fields the
// path fixes (provider, services). A lab that does not hold what its
// knobs asked has its cells recorded "not applied", and not measured.
func (p *plan) addCells(mv ModeVariant, l *lab.Lab, path string, ep modes.Endpoint, proto results.Cell, points []knob.Point) error {
	proto.Mode, proto.ModeOptions, proto.ModeFacts, proto.Path = mv.Label, mv.Options, l.State.Facts, path
	if mv.Label != mv.Mode {
		proto.LabMode = mv.Mode
	}
	if p.spec.Nodes > 1 {
		proto.Nodes = p.spec.Nodes
	}
	if proof := p.knobs[l.State.Name]; proof != nil {
		proto.Proofs, proto.NotApplied = proof.Proofs, proof.NotApplied
	}
	planned := 0
	for _, f := range p.spec.Family.Measured() {
		addr := ep.Addr(f)
		if addr == "" {
			p.out.Metadata.Skipped = append(p.out.Metadata.Skipped, results.Skipped{Mode: mv.Label, Provider: proto.Provider,
				Reason: fmt.Sprintf("path %s of mode %s has no %s address", path, mv.Mode, f)})
			continue
		}
		proto.Family = f.Cell()
		// The lab's namespaces: what a profile counts as the test's.
		cells, err := p.spec.PlanPoints(points, proto, engine.Target{ServerNS: ep.ServerNS, ClientNS: ep.ClientNS, Addr: addr, ClientCgroup: ep.ClientCgroup}, labNamespaces(l))
		for _, c := range cells {
			p.cellProof(l.State, &c)
			p.out.Cells = append(p.out.Cells, c.Cell)
			if c.Cell.NotApplied == "" {
				p.cells = append(p.cells, c)
			}
		}
		planned += len(cells)
		if err != nil {
			return err
		}
	}
	if proto.NotApplied != "" && planned > 0 {
		p.prog.Note("%s with %s: not applied, not measured: %s", mv.Label, l.State.Spec.Knobs, proto.NotApplied)
	}
	return nil
}

// teardown removes every lab the plan brought up.
func (p *plan) teardown() {
	for _, l := range p.labs {
		name := l.State.Name
		l.Release()
		if err := lab.Down(name, nil); err != nil {
			p.prog.Note("warning: %v", err)
		}
	}
}

func pathNames(m map[string]modes.Endpoint) string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	sort.Strings(n)
	return fmt.Sprint(n)
}

// loadServices loads the service path's services (and n generated ones) into
// a lab with provider, and returns the path and the cell fields it fixes.
func loadServices(l *lab.Lab, provider string, n int, specs []labservice.Spec, mv ModeVariant, m modes.Mode, prog Progress) (modes.Endpoint, results.Cell, error) {
	st := l.State
	c, err := labservice.Setup(st, provider, n, specs)
	if err != nil {
		return modes.Endpoint{}, results.Cell{}, err
	}
	prog.Note("%s: %s loaded %d services in %.2fs", mv.Label, provider, c.Count(), c.LoadSeconds)
	server, client, err := labservice.Path(st)
	if err != nil {
		return modes.Endpoint{}, results.Cell{}, err
	}
	cell := results.Cell{Provider: provider, ExtraServices: n, ServiceLoadSec: c.LoadSeconds,
		Note: labservice.Caveat(provider, m, mv.Options)}
	if cell.Note != "" {
		prog.Note("%s with %s: %s", mv.Label, provider, cell.Note)
	}
	// The clusterIP of each family the lab has (EngineServices).
	ep := modes.Endpoint{ServerNS: server.NS, ClientNS: client.NS}
	if st.Spec.Family.HasIPv4() {
		ep.Target = labservice.DefaultVIP
	}
	if st.Spec.Family.HasIPv6() {
		ep.Target6 = labservice.DefaultVIP6
	}
	vips := ep.Target + ep.Target6
	if ep.Target != "" && ep.Target6 != "" {
		vips = ep.Target + ", " + ep.Target6
	}
	ep.Note = fmt.Sprintf("%s -> clusterIP %s -> %s (%s)", client.Name, vips, server.Name, provider)
	// Socket-level Services act only for clients in the lab's cgroup.
	if ep.ClientCgroup, err = labservice.ClientCgroup(st, provider); err != nil {
		return modes.Endpoint{}, results.Cell{}, err
	}
	return ep, cell, nil
}

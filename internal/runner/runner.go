// Package runner runs a measurement matrix: it brings one lab up per mode,
// runs every cell (mode x path x test) in interleaved rounds, and tears the
// labs down whatever happens.
package runner

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/analysis"
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/service"
	"github.com/vnetlab/vnetlab/internal/topo"
)

// ModeVariant is a mode with options, labelled for the table (e.g.
// "bridge" and "bridge-nf-off" are both mode bridge).
type ModeVariant struct {
	Label   string            `yaml:"name" json:"name"`
	Mode    string            `yaml:"mode" json:"mode"`
	Options map[string]string `yaml:"options" json:"options,omitempty"`
}

// Spec is a whole run.
type Spec struct {
	Modes    []ModeVariant
	Paths    []string
	Tests    []engine.Test
	Engine   string // "" = default per test
	Duration time.Duration
	Repeat   int
	Warmup   int
	Streams  int
	Size     int
	Rate     string
	Pods     []lab.PodSpec
	PodCIDR  string
	// Nodes (2: cross-host) and the underlay's tbf rate.
	Nodes        int
	UnderlayRate string
	Summary      SummaryOptions // CV threshold, CI method, baseline mode
	// LabPrefix starts every lab name ("r" when empty; tests use their own
	// prefix so concurrent test runs never clash).
	LabPrefix string

	// Service path (path "service"): one lab per mode x provider x count of
	// extra services; the pod paths get a lab of their own without services.
	Providers     []string       // default: service.DefaultProvider
	ExtraServices []int          // default: [0]
	Services      []service.Spec // default: service.DefaultVIP on the engine ports -> first pod
}

// Progress is told about each step; Sample is called before each sample.
type Progress interface {
	Begin(total int)
	Sample(i int, label string)
	Note(format string, args ...any)
	End()
}

type cellRun struct {
	cell   *results.Cell
	target engine.Target
	driver engine.Driver
	label  string
}

// Run executes spec and returns the filled results (metadata is the caller's).
func Run(ctx context.Context, spec Spec, prog Progress) (*results.File, error) {
	if err := CheckSpec(spec); err != nil {
		return nil, err
	}
	out := &results.File{SchemaVersion: results.SchemaVersion}
	var labs []*lab.Lab
	defer func() {
		for _, l := range labs {
			name := l.State.Name
			l.Release()
			if err := lab.Down(name, nil); err != nil {
				prog.Note("warning: %v", err)
			}
		}
	}()
	prefix := spec.LabPrefix
	if prefix == "" {
		prefix = "run"
	}
	runID := fmt.Sprintf("%s%04d", prefix, rand.New(rand.NewSource(time.Now().UnixNano()^int64(os.Getpid()))).Intn(10000))
	var cells []*cellRun
	upLab := func(mv ModeVariant) (*lab.Lab, error) {
		ls := lab.Spec{Name: fmt.Sprintf("%s-%d", runID, len(labs)), Mode: mv.Mode, Pods: spec.Pods, PodCIDR: spec.PodCIDR, Options: mv.Options,
			Nodes: spec.Nodes, UnderlayRate: spec.UnderlayRate}
		prog.Note("bringing up %s (lab %s)", mv.Label, ls.Name)
		l, err := lab.Up(ctx, ls, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mv.Label, err)
		}
		labs = append(labs, l)
		return l, nil
	}
	// addCells adds a cell per test for one path of a lab; proto carries
	// the fields the path fixes (provider, services).
	addCells := func(mv ModeVariant, l *lab.Lab, path string, ep topo.Endpoint, proto results.Cell) error {
		for _, t := range spec.Tests {
			d, err := engine.For(spec.Engine, t)
			if err != nil {
				return err
			}
			c := proto
			c.Mode, c.ModeOptions, c.ModeFacts, c.Path, c.Test, c.Engine, c.Unit = mv.Label, mv.Options, l.State.Facts, path, string(t), d.Name(), t.Unit()
			if spec.Nodes > 1 {
				c.Nodes = spec.Nodes
			}
			out.Cells = append(out.Cells, &c)
			cells = append(cells, &cellRun{cell: &c, driver: d, label: c.ID().String(),
				target: engine.Target{ServerNS: ep.ServerNS, ClientNS: ep.ClientNS, Addr: ep.Target, ClientCgroup: ep.ClientCgroup}})
		}
		return nil
	}
	var plainPaths []string
	servicePath := false
	for _, p := range spec.Paths {
		if p == ServicePath {
			servicePath = true
		} else {
			plainPaths = append(plainPaths, p)
		}
	}
	extras := spec.ExtraServices
	if len(extras) == 0 {
		extras = []int{0}
	}
	for _, mv := range spec.Modes {
		m, err := topo.Get(mv.Mode)
		if err != nil {
			return nil, err
		}
		if err := topo.Available(m); err != nil {
			out.Metadata.Skipped = append(out.Metadata.Skipped, results.Skipped{Mode: mv.Label, Reason: err.Error()})
			prog.Note("skipping %s: %v", mv.Label, err)
			continue
		}
		if len(plainPaths) > 0 {
			l, err := upLab(mv)
			if err != nil {
				return nil, err
			}
			for _, path := range plainPaths {
				ep, ok := l.State.Paths[path]
				if !ok {
					out.Metadata.Skipped = append(out.Metadata.Skipped, results.Skipped{Mode: mv.Label, Reason: fmt.Sprintf("mode %s has no path %q (has: %s)", mv.Mode, path, pathNames(l.State.Paths))})
					continue
				}
				if err := addCells(mv, l, path, ep, results.Cell{}); err != nil {
					return nil, err
				}
			}
		}
		if !servicePath {
			continue
		}
		// One lab per provider and count: providers cannot share a node (the
		// first to DNAT wins), and each count is a different table to search.
		providers := spec.Providers
		if len(providers) == 0 {
			providers = []string{service.DefaultProviderFor(mv.Mode)}
		}
		for _, p := range providers {
			if err := service.Check(p, mv.Mode); err != nil {
				out.Metadata.Skipped = append(out.Metadata.Skipped, results.Skipped{Mode: mv.Label, Provider: p, Reason: err.Error()})
				prog.Note("skipping %s with %s: %v", mv.Label, p, err)
				continue
			}
			for _, n := range extras {
				l, err := upLab(mv)
				if err != nil {
					return nil, err
				}
				ep, cell, err := loadServices(l, p, n, spec.Services, mv, prog)
				if err != nil {
					out.Metadata.Skipped = append(out.Metadata.Skipped, results.Skipped{Mode: mv.Label, Provider: p, Reason: err.Error()})
					prog.Note("skipping %s with %s: %v", mv.Label, p, err)
					continue
				}
				if err := addCells(mv, l, ServicePath, ep, cell); err != nil {
					return nil, err
				}
			}
		}
	}
	if len(cells) == 0 {
		return out, fmt.Errorf("nothing to run: every mode was skipped")
	}
	if err := execute(ctx, spec, cells, prog); err != nil {
		return out, err
	}
	analysis.Analyze(out.Cells, spec.Summary)
	return out, nil
}

// Planned is one cell ready to measure: where (target) and with what (driver).
type Planned struct {
	Cell   *results.Cell
	Target engine.Target
	Driver engine.Driver
}

// Execute measures cells planned elsewhere (the pods of `vnetlab kube run`)
// in the same interleaved rounds as a lab run, then computes the statistics.
func Execute(ctx context.Context, spec Spec, cells []Planned, prog Progress) error {
	if err := CheckSpec(spec); err != nil {
		return err
	}
	var runs []*cellRun
	var all []*results.Cell
	for _, c := range cells {
		runs = append(runs, &cellRun{cell: c.Cell, target: c.Target, driver: c.Driver, label: c.Cell.ID().String()})
		all = append(all, c.Cell)
	}
	if err := execute(ctx, spec, runs, prog); err != nil {
		return err
	}
	analysis.Analyze(all, spec.Summary)
	return nil
}

// execute runs every cell in interleaved rounds (warmup rounds discarded).
func execute(ctx context.Context, spec Spec, cells []*cellRun, prog Progress) error {
	rounds := spec.Warmup + spec.Repeat
	prog.Begin(rounds * len(cells))
	n := 0
	for r := 0; r < rounds; r++ {
		for _, c := range cells {
			if err := ctx.Err(); err != nil {
				prog.End()
				return err
			}
			n++
			label := c.label
			if r < spec.Warmup {
				label += " (warmup)"
			}
			prog.Sample(n, label)
			es := engine.Spec{Test: engine.Test(c.cell.Test), Duration: spec.Duration, Streams: spec.Streams, Size: spec.Size, Rate: spec.Rate}
			start := time.Now().UTC()
			res, usage, err := measure(ctx, c.driver, c.target, es)
			if r < spec.Warmup {
				continue
			}
			s := results.Sample{Result: res, Valid: err == nil, Start: start, CPU: usage}
			if err != nil {
				s.Error = err.Error()
				prog.Note("sample failed: %s: %v", c.label, err)
			}
			c.cell.Samples = append(c.cell.Samples, s)
		}
	}
	prog.End()
	return nil
}

// CheckSpec refuses a bad spec before anything is built.
func CheckSpec(spec Spec) error {
	if spec.Repeat < 1 {
		return fmt.Errorf("repeat must be 1 or more (got %d)", spec.Repeat)
	}
	if spec.Warmup < 0 {
		return fmt.Errorf("warmup must be 0 or more (got %d)", spec.Warmup)
	}
	if spec.Duration < time.Second {
		return fmt.Errorf("duration %s is too short: use 1s or more", spec.Duration)
	}
	if err := checkEngines(spec); err != nil {
		return err
	}
	return checkSummary(spec)
}

// checkEngines refuses, before anything is built, a test no engine can run
// with these settings or whose program is not installed.
func checkEngines(spec Spec) error {
	for _, t := range spec.Tests {
		d, err := engine.For(spec.Engine, t)
		if err != nil {
			return err
		}
		es := engine.Spec{Test: t, Duration: spec.Duration, Streams: spec.Streams, Size: spec.Size, Rate: spec.Rate}
		if err := engine.Check(d, es); err != nil {
			return err
		}
		if p, ok := d.(interface{ Programs() []string }); ok {
			for _, prog := range p.Programs() {
				if _, err := exec.LookPath(prog); err != nil {
					return fmt.Errorf("%s is not installed (needed by the %s engine for %s): apt-get install %s", prog, d.Name(), t, prog)
				}
			}
		}
	}
	return nil
}

// checkSummary refuses bad summary options before any lab is built.
func checkSummary(spec Spec) error {
	o := spec.Summary
	if o.CVThreshold < 0 {
		return fmt.Errorf("cv threshold must be 0 or more (got %g)", o.CVThreshold)
	}
	if o.CIMethod != "" && !slices.Contains(CIMethods, o.CIMethod) {
		return fmt.Errorf("unknown CI method %q (known: %s)", o.CIMethod, strings.Join(CIMethods, ", "))
	}
	if o.Baseline == "" {
		return nil
	}
	var labels []string
	for _, m := range spec.Modes {
		if m.Label == o.Baseline {
			return nil
		}
		labels = append(labels, m.Label)
	}
	return fmt.Errorf("baseline %q is not one of the modes in this run (%s): pick one of them", o.Baseline, strings.Join(labels, ", "))
}

func pathNames(m map[string]topo.Endpoint) string {
	var n []string
	for k := range m {
		n = append(n, k)
	}
	sort.Strings(n)
	return fmt.Sprint(n)
}

// ServicePath is the path through a clusterIP: the second pod dials
// service.DefaultVIP, whose backend is the first pod.
const ServicePath = "service"

// loadServices loads the service path's services (and n generated ones) into
// a lab with provider, and returns the path and the cell fields it fixes.
func loadServices(l *lab.Lab, provider string, n int, specs []service.Spec, mv ModeVariant, prog Progress) (topo.Endpoint, results.Cell, error) {
	st := l.State
	c, err := service.NewConfig(st, provider, n, specs)
	if err != nil {
		return topo.Endpoint{}, results.Cell{}, err
	}
	if err := service.Apply(st, nil, c); err != nil {
		return topo.Endpoint{}, results.Cell{}, err
	}
	if err := c.Save(st.Name); err != nil {
		return topo.Endpoint{}, results.Cell{}, err
	}
	prog.Note("%s: %s loaded %d services in %.2fs", mv.Label, provider, c.Count(), c.LoadSeconds)
	server, client, err := service.Path(st)
	if err != nil {
		return topo.Endpoint{}, results.Cell{}, err
	}
	cell := results.Cell{Provider: provider, ExtraServices: n, ServiceLoadSec: c.LoadSeconds,
		Note: service.Caveat(provider, mv.Mode, mv.Options)}
	if cell.Note != "" {
		prog.Note("%s with %s: %s", mv.Label, provider, cell.Note)
	}
	ep := topo.Endpoint{ServerNS: server.NS, ClientNS: client.NS, Target: service.DefaultVIP,
		Note: fmt.Sprintf("%s -> clusterIP %s -> %s (%s)", client.Name, service.DefaultVIP, server.Name, provider)}
	// Socket-level Services act only for clients in the lab's cgroup.
	if ep.ClientCgroup, err = service.ClientCgroup(st, provider); err != nil {
		return topo.Endpoint{}, results.Cell{}, err
	}
	return ep, cell, nil
}

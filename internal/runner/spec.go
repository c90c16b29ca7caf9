package runner

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/doctor"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// ModeVariant is a mode with options, labelled for the table (e.g.
// "bridge" and "bridge-nf-off" are both mode bridge).
type ModeVariant struct {
	Label   string            `yaml:"name" json:"name"`
	Mode    string            `yaml:"mode" json:"mode"`
	Options map[string]string `yaml:"options" json:"options,omitempty"`
}

// Variants labels each mode with its own name, all with the same options.
func Variants(modes []string, options map[string]string) []ModeVariant {
	var out []ModeVariant
	for _, m := range modes {
		out = append(out, ModeVariant{Label: m, Mode: m, Options: options})
	}
	return out
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
	// CPUAffinity pins every engine's client and server (--cpu-affinity).
	CPUAffinity cpupin.Setting
	// CPUsElsewhere: the engines run on other machines (kube run's nodes),
	// so CPUAffinity is not checked against this machine's CPUs and its
	// auto means unpinned (vnetlab does not know the nodes' CPUs).
	CPUsElsewhere bool
	// Pods, or else PodCount pods numbered from .10 of PodCIDR
	// (lab.DefaultPodSpecs).
	Pods     []lab.PodSpec
	PodCount int
	PodCIDR  string
	// Nodes (2: cross-host) and the underlay's tbf rate.
	Nodes        int
	UnderlayRate string
	// Family is the labs' IP family (--ip-family): a dual-stack lab's cells
	// measure each family on the same pods (results.CellID.Family);
	// PodCIDR6 the pods' IPv6 network.
	Family   family.Family
	PodCIDR6 string
	Summary  analysis.Options // CV threshold, CI method, baseline mode
	// LabPrefix starts every lab name ("run" when empty; tests use their own
	// prefix so concurrent test runs never clash).
	LabPrefix string

	// Service path (path "service"): one lab per mode x provider x count of
	// extra services; the pod paths get a lab of their own without services.
	Providers []string // default: labservice.DefaultProviderFor(mode)
	// PolicyProviders enforce the policy knobs' NetworkPolicies
	// (policies.go): a lab per provider, each a cell coordinate
	// (results.CellID.PolicyProvider). Default, when a policy knob is set
	// or swept: labpolicy.DefaultProvider.
	PolicyProviders []string
	// ClusterPolicies: the policy knobs are a cluster's (kube run), its
	// enforcer's to load (internal/kube/bench/policies.go), never a lab
	// provider's: the lab providers' checks and names are left out.
	ClusterPolicies bool
	ExtraServices   []int             // default: [0]
	Services        []labservice.Spec // default: labservice.DefaultVIP on the engine ports -> first pod

	// Profile samples every measured window's CPU stacks and data-path
	// events (profile.go); ProfileHz is the rate per CPU (0: the default),
	// ProfileDir where each cell's pprof, folded stacks and flame graph go.
	Profile    bool
	ProfileHz  int
	ProfileDir string

	// The knobs (internal/measure/knob; knobs.go): Settings holds each
	// knob's value for every cell (Streams, Size, Load, and Links set on
	// every link of each lab's path: a lab per distinct setting), and
	// Sweep's points give each cell its own values of the knobs it sweeps
	// (results.CellID.Point).
	knob.Settings
	Sweep knob.Sweep

	// Order is the cells' order within each round (OrderRandom, the
	// default, or OrderFixed); OrderSeed seeds the shuffle (0: drawn at
	// the start, and recorded). MaxTime bounds a precision run's rounds
	// (Summary.Precision: the CI half-width every comparison is run to).
	Order     string
	OrderSeed uint64
	MaxTime   time.Duration
	// Duet measures the two modes' cells of each coordinate at once, each
	// on a CPU of its own (duet.go).
	Duet bool

	// Cells, when set, keeps only the matrix cells whose name
	// (results.CellID.String(), e.g. "veth-routed/service(ebpf+10000)/tcp_crr")
	// matches one of these path.Match patterns ("*" stops at "/"), and builds
	// only the labs those cells need: a benchmark picks its rows out of a
	// matrix without measuring the rest.
	Cells []string
}

// Wants says whether the cell named id is measured (Cells).
func (s Spec) Wants(id results.CellID) bool { return results.CellPatterns(s.Cells).Match(id) }

// checkCells refuses a malformed pattern before anything is built.
func checkCells(cells []string) error { return results.CellPatterns(cells).Check() }

// DefaultSpec is a plain `vnetlab run`: seed 002's podIP row
// (doctor.DefaultModes) with iperf3's tcp_stream (the seed's test) and the
// rr engine's tcp_rr and tcp_crr (what a packet and a connection cost each
// path), 5 samples of 4 s each, every engine's client and server on one
// CPU (cpupin.Auto), between the two default pods: every cell's CV 0.3-2.5%
// on a steady 2-CPU machine, 2-17% on one whose memory speed moves with
// another tenant (docs/engines.md, "CPU affinity" and "How steady this
// machine is": `vnetlab doctor` says which). Flags and scenario files start
// from it.
func DefaultSpec() Spec {
	return Spec{
		Modes:         Variants(doctor.DefaultModes, nil),
		Paths:         []string{"pod"},
		Tests:         []engine.Test{engine.TCPStream, engine.TCPRR, engine.TCPCRR},
		Duration:      4 * time.Second,
		Repeat:        5,
		MaxTime:       DefaultMaxTime,
		Settings:      knob.Settings{Streams: 1, Rate: knob.Unlimited},
		CPUAffinity:   cpupin.MustParse(cpupin.Default),
		PodCount:      lab.DefaultPods,
		PodCIDR:       lab.DefaultPodCIDR,
		Family:        family.IPv4,
		Nodes:         1,
		ExtraServices: []int{0},
		Summary:       analysis.Options{CVThreshold: analysis.DefaultCVThreshold, CIMethod: analysis.CIMethods[0]},
	}
}

// DefaultMaxTime bounds a precision run's measured rounds (--max-time).
const DefaultMaxTime = 6 * time.Minute

// ServicePath is the path through a clusterIP: the second pod dials
// labservice.DefaultVIP, whose backend is the first pod.
const ServicePath = "service"

// podSpecs are the pods of every lab of the run.
func (s Spec) podSpecs() ([]lab.PodSpec, error) {
	if s.Pods != nil {
		return s.Pods, nil
	}
	return lab.PodsFor(s.PodCount, s.labSpec())
}

// labSpec is what every lab of the run shares: its networks and nodes.
func (s Spec) labSpec() lab.Spec {
	return lab.Spec{PodCIDR: s.PodCIDR, Nodes: s.Nodes, UnderlayRate: s.UnderlayRate, Family: s.Family, PodCIDR6: s.PodCIDR6}
}

// EngineSpec is what one sample of test t at point pt over family f
// measures: the spec's settings for t, with the point's values over them.
// A planned cell carries its point and family typed (Planned), read once
// when it was planned.
func (s Spec) EngineSpec(t engine.Test, pt knob.Point, f family.Family) engine.Spec {
	s = s.at(pt)
	rate, streams := s.Rate, s.Streams
	if d, err := engine.For(s.Engine, t); err == nil {
		rate, streams = s.probe(t, d)
	}
	return engine.Spec{Test: t, Duration: s.Duration, Streams: streams, Size: s.Size, Rate: rate, Load: s.Load, CPU: s.pins(), Family: f}
}

// Plan is a cell per test of the spec and point of its sweep at one
// target, each a copy of proto (the coordinates the target fixes: mode,
// path, provider, placement, ...) with its test, point, engine and unit;
// only the cells the spec wants (Cells). Labs (plan.go) and clusters
// (internal/kube/bench) plan their cells here: a coordinate the spec
// varies (a sweep's points) is crossed in here, once.
func (s Spec) Plan(proto results.Cell, target engine.Target, netns []string) ([]Planned, error) {
	return s.PlanPoints(s.Sweep.Points(), proto, target, netns)
}

// PlanPoints is Plan over some of the sweep's points (a lab's: those its
// links were set for; a cluster's namespace: those of its policy set).
func (s Spec) PlanPoints(points []knob.Point, proto results.Cell, target engine.Target, netns []string) ([]Planned, error) {
	var out []Planned
	fam := family.OfCell(proto.Family)
	for _, t := range s.Tests {
		d, err := engine.For(s.Engine, t)
		if err != nil {
			return out, err
		}
		for _, pt := range points {
			if !s.appliesTo(pt, t) {
				continue
			}
			c := proto
			c.Test, c.Point, c.Engine, c.Unit = string(t), pt.String(), d.Name(), t.Unit()
			if !s.Wants(c.ID()) {
				continue
			}
			out = append(out, Planned{Cell: &c, Target: target, Driver: d, NetNS: netns, Test: t, Point: pt, Family: fam})
		}
	}
	return out, nil
}

// pins says where every test's client and server run
// (cpupin.Setting.Resolve).
func (s Spec) pins() cpupin.Pins {
	if s.CPUsElsewhere {
		p, _ := s.CPUAffinity.Explicit()
		return p
	}
	allowed, _ := cpupin.Allowed() // checked by Validate
	return s.CPUAffinity.Resolve(allowed)
}

// settings are the parameters recorded in the results file.
func (s Spec) settings() results.Settings {
	st := results.Settings{Duration: s.Duration.String(), Repeat: s.Repeat, Warmup: s.Warmup, Knobs: knobsOf(s.Settings),
		CVThreshold: s.Summary.CVThreshold, CIMethod: s.Summary.CIMethod, Baseline: s.Summary.Baseline,
		CPUAffinity: s.CPUAffinity.String(), Order: s.Order, OrderSeed: s.OrderSeed, Precision: s.Summary.Precision, Duet: s.Duet}
	if s.Order != OrderFixed {
		st.Order = OrderRandom
	}
	if s.Summary.Precision > 0 {
		st.MaxTime = s.MaxTime.String()
	}
	if s.UsesPolicies() && !s.ClusterPolicies {
		st.PolicyProviders = s.policyProviders()
	}
	st.Sweep = sweepOf(s.Sweep)
	return st
}

// Validate refuses a bad spec before anything is built.
func (spec Spec) Validate() error {
	if spec.Repeat < 1 {
		return field.Errorf("repeat", "{repeat} must be 1 or more (got %d)", spec.Repeat)
	}
	if spec.Warmup < 0 {
		return field.Errorf("warmup", "{warmup} must be 0 or more (got %d)", spec.Warmup)
	}
	if spec.Duration < time.Second {
		return field.Errorf("duration", "{duration} %s is too short: use 1s or more", spec.Duration)
	}
	if err := spec.checkRounds(); err != nil {
		return err
	}
	if !spec.CPUsElsewhere {
		allowed, err := cpupin.Allowed()
		if err != nil {
			return err
		}
		if err := spec.CPUAffinity.Check(allowed); err != nil {
			return err
		}
		if err := spec.checkDuet(allowed); err != nil {
			return err
		}
	}
	for _, check := range []func() error{spec.checkKnobs, func() error { return checkEngines(spec) }, func() error { return checkSummary(spec) },
		func() error { return checkCells(spec.Cells) }, spec.checkServicePath, spec.checkFamily, spec.checkPolicies} {
		if err := check(); err != nil {
			return err
		}
	}
	_, err := spec.podSpecs()
	return err
}

// checkServicePath refuses bad service path settings, and settings that
// only the service path uses when it is not measured.
func (spec Spec) checkServicePath() error {
	for _, p := range spec.Providers {
		if _, err := labservice.Get(p); err != nil {
			return err
		}
	}
	for _, n := range spec.ExtraServices {
		if err := labservice.CheckExtra(n); err != nil {
			return field.Errorf("extra_services", "{extra_services} %v", err)
		}
	}
	for _, s := range spec.Services {
		if err := s.Check(); err != nil {
			return err
		}
	}
	if slices.Contains(spec.Paths, ServicePath) {
		return nil
	}
	custom := len(spec.Services) > 0 || len(spec.ExtraServices) > 1 || (len(spec.ExtraServices) == 1 && spec.ExtraServices[0] != 0) ||
		len(spec.Providers) > 1 || (len(spec.Providers) == 1 && spec.Providers[0] != labservice.DefaultProvider)
	if custom {
		return field.Errorf("paths", "providers and services apply to the service path: add it with {paths} pod,service")
	}
	return nil
}

// providersFor are the providers the service path measures in mode m:
// --provider's, or the mode's default provider.
func (spec Spec) providersFor(m modes.Mode) []string {
	if len(spec.Providers) == 0 {
		return []string{labservice.DefaultProviderFor(m)}
	}
	return spec.Providers
}

// checkFamily refuses, before any lab is built, a mode that lacks the
// labs' IP family (a mode the kernel lacks is skipped by the plan, as
// without a family) and the service path in a lab with IPv6 for a provider
// without IPv6 Services.
func (spec Spec) checkFamily() error {
	for _, mv := range spec.Modes {
		m, err := modes.Get(mv.Mode)
		if err != nil {
			return err
		}
		if spec.Family.HasIPv6() && modes.Available(m) != nil {
			continue
		}
		if err := spec.labSpec().CheckFamily(m); err != nil {
			return err
		}
	}
	if !slices.Contains(spec.Paths, ServicePath) {
		return nil
	}
	for _, mv := range spec.Modes {
		m, _ := modes.Get(mv.Mode) // checked above
		for _, p := range spec.providersFor(m) {
			if err := labservice.CheckFamily(p, spec.Family); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkEngines refuses, before anything is built, a test no engine can run
// with these settings (at any point of the sweep) or whose program is not
// installed.
func checkEngines(spec Spec) error {
	for _, t := range spec.Tests {
		d, err := engine.For(spec.Engine, t)
		if err != nil {
			return err
		}
		for _, pt := range spec.Sweep.Points() {
			for _, f := range spec.Family.Measured() {
				if err := engine.Check(d, spec.EngineSpec(t, pt, f)); err != nil {
					return err
				}
			}
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
	if o.CIMethod != "" && !slices.Contains(analysis.CIMethods, o.CIMethod) {
		return fmt.Errorf("unknown CI method %q (known: %s)", o.CIMethod, strings.Join(analysis.CIMethods, ", "))
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

// checkRounds refuses a bad order or precision target.
func (spec Spec) checkRounds() error {
	if spec.Order != "" && !slices.Contains(Orders, spec.Order) {
		return field.Errorf("order", "unknown {order} %q: use %s", spec.Order, strings.Join(Orders, " or "))
	}
	p := spec.Summary.Precision
	if p < 0 || p >= 1 {
		return field.Errorf("precision", "{precision} %g is not a share of the ratio: use e.g. 2%% (0 < precision < 100%%)", p)
	}
	if p > 0 && spec.MaxTime < spec.Duration*time.Duration(analysis.FirstLook) {
		return field.Errorf("max_time", "{max_time} %s is shorter than a precision run's first %d rounds (%s for each cell at {duration} %s): give it more", spec.MaxTime, analysis.FirstLook, spec.Duration*time.Duration(analysis.FirstLook), spec.Duration)
	}
	return nil
}

package runner

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results"
)

// The policy knobs on real labs (prefix stn).

const policyLabPrefix = "stn"

// A sweep of the policies knob over two providers is one cell per count
// and provider, each measured and proven: the provider's objects read back
// equal to what the compiled policies make (more with more policies), the
// denied flow dropped and counted, the proof sample's connections
// evaluated; the table names each cell's provider and point.
func TestPolicySweepProven(t *testing.T) {
	requireLabs(t, policyLabPrefix)
	spec := knobSpec(t, "veth-routed", []engine.Test{engine.TCPCRR}, "policies=0,200")
	spec.LabPrefix, spec.Repeat = policyLabPrefix, 1
	spec.PolicyProviders = []string{labpolicy.NFTables, labpolicy.IPTables}
	f := runKnobs(t, spec)
	if len(f.Cells) != 4 {
		t.Fatalf("%d cells, want one per count and provider", len(f.Cells))
	}
	for _, prov := range spec.PolicyProviders {
		objects := map[string]int{}
		for _, point := range []string{"policies=0", "policies=200"} {
			var c *results.Cell
			for _, x := range f.Cells {
				if x.Point == point && x.PolicyProvider == prov {
					c = x
				}
			}
			if c == nil {
				t.Fatalf("no %s cell at %s", prov, point)
			}
			p := c.Policies
			if p == nil || c.NotApplied != "" || p.NotApplied != "" {
				t.Fatalf("%s: not proven: %q %+v", c.ID(), c.NotApplied, p)
			}
			if p.Objects != p.Want || p.Want == 0 || p.ProbeDenied == 0 || p.Evaluated == 0 || !strings.HasSuffix(p.Probe, ": dropped") {
				t.Errorf("%s: proof %+v", c.ID(), p)
			}
			if c.Valid != spec.Repeat || c.ProofSample == nil {
				t.Errorf("%s: %d valid samples, proof sample %v", c.ID(), c.Valid, c.ProofSample != nil)
			}
			objects[point] = p.Objects
		}
		if objects["policies=200"] < objects["policies=0"]+200 {
			t.Errorf("%s: %v objects: 200 more policies are 200 rules more at least", prov, objects)
		}
	}
	var buf bytes.Buffer
	report.Table(&buf, f, false)
	if out := buf.String(); !strings.Contains(out, "pod:iptables{policies=200}") {
		t.Errorf("the table does not name the cells' provider and point:\n%s", out)
	}
	if s := f.Metadata.Settings; len(s.PolicyProviders) != 2 || s.Sweep == nil {
		t.Errorf("settings: %+v", s)
	}
}

// Bad input of the policy knobs is one line before anything is built: an
// unknown provider, a mode no provider of the run can serve (a provider
// that cannot serve one mode of several while another can is planned
// around: its lab skipped with the reason), a count over what a provider
// loads in reasonable time.
func TestPolicyRefusals(t *testing.T) {
	labpolicy.Register(slow{})
	if os.Geteuid() != 0 {
		t.Skip("needs root: probes the kernel's features")
	}
	base := DefaultSpec()
	base.Modes = Variants([]string{"veth-routed"}, nil)
	base.Tests = []engine.Test{engine.TCPCRR}
	for _, c := range []struct {
		name string
		edit func(s *Spec)
		want string
	}{
		{"unknown provider", func(s *Spec) { s.PolicyProviders = []string{"pf"} }, `--policy-providers: unknown policy provider "pf" (known: `},
		{"a mode no provider serves", func(s *Spec) {
			s.Modes, s.Policy.Policies = Variants([]string{"macvlan"}, nil), 10
		}, "--policy-providers nftables cannot enforce policies in mode macvlan (nftables: packets between macvlan pods"},
		{"one mode of several no provider serves", func(s *Spec) {
			s.Modes, s.Policy.Policies = Variants([]string{"veth-routed", "macvlan"}, nil), 10
		}, "--policy-providers nftables cannot enforce policies in mode macvlan"},
		{"too many to load", func(s *Spec) {
			s.PolicyProviders, s.Policy.Policies = []string{slowProvider}, 12001
		}, "--policies: policy provider stn-slow would take about 2m0s to load 12001 policies and ipblocks into each lab (about 100 a second, measured: docs/policies.md): use at most 12000, or another provider"},
		{"too many in a sweep", func(s *Spec) {
			ax, _ := knob.ParseAxisFlag("ipblocks=0,100000")
			s.PolicyProviders, s.Sweep.Axes = []string{labpolicy.NFTables, slowProvider}, []knob.Axis{ax}
		}, "--sweep: policy provider stn-slow would take about 16m40s to load 100000"},
		{"out of range", func(s *Spec) { s.Policy.IPBlocks = 200000 }, "--ipblocks: ipblocks 200000 is above the maximum 100000"},
	} {
		s := base
		c.edit(&s)
		err := s.Validate()
		got := ""
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("%s: %q, want one line starting %q", c.name, got, c.want)
		}
	}
	s := base
	s.PolicyProviders, s.Policy.Policies = []string{slowProvider}, 12000
	if err := s.Validate(); err != nil {
		t.Errorf("as many policies as a provider loads in 2 minutes: %v", err)
	}
	s = base
	s.Modes, s.PolicyProviders = Variants([]string{"veth-routed", "bridge"}, nil), []string{labpolicy.NFTables, labpolicy.IPTables}
	if err := s.Validate(); err != nil {
		t.Errorf("veth-routed and bridge with nftables and iptables: %v", err)
	}
	states, _ := lab.List()
	for _, st := range states {
		if strings.HasPrefix(st.Name, "run") {
			t.Errorf("a refused run left lab %s", st.Name)
		}
	}
}

// Each policy set is a lab of its own (with each link setting), and a run
// that sets no policy knob and names no provider loads no policies.
func TestPolicyGroups(t *testing.T) {
	s := DefaultSpec()
	if s.UsesPolicies() || len(s.labGroups()) != 1 || s.policyProviders()[0] != "" {
		t.Fatalf("a plain run: uses policies %v, %d lab groups, providers %q", s.UsesPolicies(), len(s.labGroups()), s.policyProviders())
	}
	pol, _ := knob.ParseAxisFlag("policies=0,100,1000")
	mtu, _ := knob.ParseAxisFlag("mtu=default,9000")
	s.Sweep.Axes = []knob.Axis{pol, mtu}
	g := s.labGroups()
	if len(g) != 4 || g[1].Policy.Policies != 100 || g[3].Lab.Get(knob.MTU) != "9000" || g[3].Policy.Policies != 0 {
		t.Errorf("groups of policies=0,100,1000 and mtu=default,9000: %+v", g)
	}
	if !s.UsesPolicies() || s.policyProviders()[0] != labpolicy.DefaultProvider || !s.SetsLinks() {
		t.Errorf("a policies sweep: uses %v, providers %q, sets a lab's own %v", s.UsesPolicies(), s.policyProviders(), s.SetsLinks())
	}
	if st := s.settings(); len(st.PolicyProviders) != 1 {
		t.Errorf("settings record providers %q", st.PolicyProviders)
	}
	// A cluster's namespaces: a group per policy set, whatever the links.
	if pg := s.PolicyGroups(); len(pg) != 3 || len(pg[0].Points) != 2 || pg[2].Set.Policies != 1000 {
		t.Errorf("policy groups of policies=0,100,1000 and mtu=default,9000: %+v", pg)
	}
	s.Sweep.Axes = []knob.Axis{pol}
	if s.SetsLinks() {
		t.Errorf("a policies sweep sets no links")
	}
	s.ClusterPolicies = true
	if st := s.settings(); len(st.PolicyProviders) != 0 {
		t.Errorf("a cluster's policies: settings record lab providers %q", st.PolicyProviders)
	}
}

// slow is a policy provider that loads 100 policies a second (registered
// by TestPolicyRefusals, never installed anywhere).
type slow struct{}

const slowProvider = "stn-slow"

func (slow) Info() labpolicy.Info {
	return labpolicy.Info{Name: slowProvider, Summary: "a test's provider", LoadRate: 100}
}
func (slow) Supports(modes.Mode, map[string]string) string { return "" }
func (slow) Install(*lab.State, *netpol.Rules) error       { return errors.New("not a real provider") }
func (slow) Update(*lab.State, *netpol.Rules, *netpol.Rules, []netpol.PodChange) error {
	return errors.New("not a real provider")
}
func (slow) Remove(*lab.State) error { return errors.New("not a real provider") }
func (slow) Prove(*lab.State) (labpolicy.Proof, error) {
	return labpolicy.Proof{}, errors.New("not a real provider")
}

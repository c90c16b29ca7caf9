package runner

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// The policy knobs (docs/policies-cost.md): a run that sets or sweeps
// policies or ipblocks, or names policy providers, loads into each of its
// labs, through one policy provider per lab, the generated set
// (labpolicy.BenchSet: the knobs' policies selecting the measured server
// pod without matching the flow, and the one allowing it), and proves it
// in force in each cell's proof round (labpolicy.CellProof: the objects
// read back against the compiled ones, a denied flow probed and dropped,
// the proof sample's packets evaluated), never in a measured window. A
// cell without the proof is not applied and not measured.

// UsesPolicies says whether the run sets or sweeps a policy knob, or names
// policy providers: a lab run loads policies into its labs, a cluster run
// (ClusterPolicies) creates them through the API.
func (s Spec) UsesPolicies() bool {
	return len(s.PolicyProviders) > 0 || slices.ContainsFunc(s.labGroups(), func(g labGroup) bool { return !g.Policy.IsZero() })
}

// policyProviders are the providers each lab is built for: "" alone when
// the run loads no policies.
func (s Spec) policyProviders() []string {
	switch {
	case !s.UsesPolicies():
		return []string{""}
	case len(s.PolicyProviders) == 0:
		return []string{labpolicy.DefaultProvider}
	}
	return s.PolicyProviders
}

// checkPolicies refuses, before anything is built, an unknown policy
// provider, a mode that none of the run's providers can serve (a provider
// that cannot serve one of several modes is skipped there, as the plan
// says), a provider that can serve none, and a set a provider would take
// minutes to load (labpolicy.CheckScale).
func (s Spec) checkPolicies() error {
	for _, p := range s.PolicyProviders {
		if _, err := labpolicy.Get(p); err != nil {
			return field.Errorf("policy_providers", "{policy_providers}: %v", err)
		}
	}
	if !s.UsesPolicies() || s.ClusterPolicies {
		return nil
	}
	provs := s.policyProviders()
	served := map[string]bool{}
	for _, mv := range s.Modes {
		m, err := modes.Get(mv.Mode)
		if err != nil {
			return err
		}
		if modes.Available(m) != nil {
			continue // skipped by the plan, with the reason
		}
		var why []string
		for _, p := range provs {
			w, _ := labpolicy.SupportsMode(p, m, mv.Options)
			if w == "" {
				served[p] = true
			} else {
				why = append(why, p+": "+w)
			}
		}
		if len(why) == len(provs) {
			return field.Errorf("policy_providers", "{policy_providers} %s cannot enforce policies in mode %s (%s): name a provider that can, or leave the mode out",
				strings.Join(provs, ","), mv.Label, strings.Join(why, "; "))
		}
	}
	for _, p := range provs {
		if !served[p] && len(served) > 0 {
			return field.Errorf("policy_providers", "{policy_providers}: policy provider %s can serve none of the run's modes: leave it out", p)
		}
	}
	most := knob.PolicySet{}
	for _, g := range s.labGroups() {
		most.Policies, most.IPBlocks = max(most.Policies, g.Policy.Policies), max(most.IPBlocks, g.Policy.IPBlocks)
	}
	for _, p := range provs {
		if err := labpolicy.CheckScale(p, most.Policies, most.IPBlocks); err != nil {
			key := string(knob.Policies)
			if s.Sweep.Sweeps(knob.Policies) || s.Sweep.Sweeps(knob.IPBlocks) {
				key = "sweep"
			}
			return field.Errorf(key, "{%s}: %v", key, err)
		}
	}
	return nil
}

// policyLab is what a lab's policies are, for its cells.
type policyLab struct {
	provider       string
	set            knob.PolicySet
	loadSec        float64
	client, server lab.PodState
}

// enforce loads set into lab l with provider, for the flow of endpoint ep
// (client to server pod); its cells prove it (plan.addCells).
func (p *plan) enforce(l *lab.Lab, mv ModeVariant, provider string, set knob.PolicySet, ep modes.Endpoint) error {
	st := l.State
	server, sok := podByNS(st, ep.ServerNS)
	client, cok := podByNS(st, ep.ClientNS)
	if !sok || !cok {
		return fmt.Errorf("the path from %s to %s is not between two pods: policies select pods", ep.ClientNS, ep.ServerNS)
	}
	what := set.String()
	if what == "" {
		what = "policies=0"
	}
	p.prog.Note("%s: loading %s with policy provider %s (lab %s)", mv.Label, what, provider, st.Name)
	c, err := labpolicy.Setup(st, provider, labpolicy.BenchSet{Policies: set.Policies, IPBlocks: set.IPBlocks, Server: server, Clients: []lab.PodState{client}, Ports: labservice.EnginePorts})
	if err != nil {
		return err
	}
	p.prog.Note("%s: policy provider %s loaded %s (%d policies) in %.2fs", mv.Label, provider, what, len(c.Policies), c.LoadSeconds)
	if p.policies == nil {
		p.policies = map[string]*policyLab{}
	}
	p.policies[st.Name] = &policyLab{provider: provider, set: set, loadSec: c.LoadSeconds, client: client, server: server}
	return nil
}

func podByNS(st *lab.State, ns string) (lab.PodState, bool) {
	i := slices.IndexFunc(st.Pods, func(p lab.PodState) bool { return p.NS == ns })
	if i < 0 {
		return lab.PodState{}, false
	}
	return st.Pods[i], true
}

// cellProof is the proof a planned cell of lab st takes for its family's
// address of the server pod (nil: the lab has no policies).
func (p *plan) cellProof(st *lab.State, c *Planned) {
	pl := p.policies[st.Name]
	if pl == nil {
		if c.Cell.PolicyProvider != "" {
			c.Cell.NotApplied = "no policies were loaded into lab " + st.Name
		}
		return
	}
	addr := pl.server.IP
	if c.Family == family.IPv6 {
		addr = pl.server.IP6
	}
	server, _ := netip.ParseAddr(addr)
	c.ProvePolicies(pl.set, pl.loadSec, &labpolicy.CellProof{Lab: st, Provider: pl.provider, ClientNS: pl.client.NS, Server: server})
}

// provePolicies files cell c's policy proof: why its Begin failed (or ""),
// sampleErr the proof sample's error; a cell without the proof is not
// applied.
func provePolicies(c Planned, why string, sampleErr error) {
	switch {
	case why != "":
	case sampleErr != nil:
		why = "the proof sample failed, so no packet of the cell was seen evaluated: " + sampleErr.Error()
	default:
		why = c.Policy.End()
	}
	pp := c.Cell.Policies
	filePolicySeen(pp, c.Policy.Seen())
	pp.NotApplied = why
	if why != "" && c.Cell.NotApplied == "" {
		c.Cell.NotApplied = "policies not proven in force: " + why
	}
}

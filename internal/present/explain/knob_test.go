package explain

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// explain --knob policies on a kube run with a lab beside the cluster:
// each line's pair carries its NetworkPolicy enforcer's CPU, the lab cell's
// through its own provider, the cluster cell's through its enforcer's lab
// provider (results.Cluster.PolicyLabProvider), and the text says it.
func TestKnobEffectsPolicyEnforcer(t *testing.T) {
	f := loadRun(t)
	base := cell(t, f, "veth-routed")
	at := func(mode, placement, provider, point string, tables float64) *results.Cell {
		c := *base
		p := *base.Profile
		p.Stages = nil
		for _, st := range base.Profile.Stages {
			if st.Stage == "tables" {
				p.DataPathUS -= st.US
				continue
			}
			p.Stages = append(p.Stages, st)
		}
		p.Stages = append(p.Stages, results.StageCost{Stage: "tables", Name: "netfilter: filter tables", Kind: "net", US: tables})
		p.DataPathUS += tables
		c.Profile, c.Mode, c.Placement, c.PolicyProvider, c.Point = &p, mode, placement, provider, point
		return &c
	}
	pf := &results.File{Metadata: results.Metadata{
		Settings: results.Settings{Sweep: &results.Sweep{Axes: []results.Axis{{Knobs: []string{"policies"}, Values: []string{"0", "1000"}}}}},
		Cluster:  &results.Cluster{Name: "k", NetworkPolicy: "vnetlab", PolicyLabProvider: "nftables"}},
		Cells: []*results.Cell{
			at("veth-routed", "", "nftables", "policies=0", 0.5), at("k", "same-node", "", "policies=0", 0.6),
			at("veth-routed", "", "nftables", "policies=1000", 2.5), at("k", "same-node", "", "policies=1000", 3.0),
		}}
	pairs, err := KnobPairs(pf, "policies", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	all, _, err := KnobEffects(pf, "policies", pairs)
	if err != nil || len(all) != 2 {
		t.Fatalf("%d effects: %v", len(all), err)
	}
	for _, e := range all {
		en := e.Enforcer
		want := map[string]float64{"veth-routed": 2.0, "k": 2.4}[e.B.Cell.Mode]
		if en == nil || en.Provider != "nftables" || math.Abs(en.B-en.A-want) > 1e-9 || en.ShareB <= en.ShareA {
			t.Errorf("%s: enforcer %+v, want nftables's stages %.1f µs more at 1000 policies, a larger share", e.B.Label, en, want)
			continue
		}
		var out bytes.Buffer
		if err := Write(&out, e); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "NetworkPolicy enforcer (nftables's stages: netfilter: filter tables + netfilter: set lookups): ") {
			t.Errorf("%s: the text lacks the enforcer's line:\n%s", e.B.Label, out.String())
		}
	}
	// Another axis has no enforcer.
	pf.Metadata.Settings.Sweep.Axes[0].Knobs = []string{"size"}
	for i, c := range pf.Cells {
		c.Point = []string{"size=1", "size=1", "size=1000", "size=1000"}[i]
	}
	pf.Metadata.Settings.Sweep.Axes[0].Values = []string{"1", "1000"}
	pairs, _ = KnobPairs(pf, "size", "", "", nil)
	if all, _, _ := KnobEffects(pf, "size", pairs); len(all) != 2 || all[0].Enforcer != nil {
		t.Errorf("a size sweep: %d effects, want 2 without the enforcer's CPU", len(all))
	}
}

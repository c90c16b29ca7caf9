// Package explain puts two profiled cells of a results file side by side
// (vnetlab explain): CPU per unit of work by stage, the data-path events
// per unit that differ, the functions seen on one side only, and one
// sentence that cites those numbers and nothing the data does not show.
package explain

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Thresholds of what is worth saying.
const (
	// MinZ: a stage's difference enters the sentence only if it is this many
	// standard deviations of sampling noise (Poisson counts) from zero.
	MinZ = 2.0
	// MinStageUS: and at least this large (µs per unit).
	MinStageUS = 0.05
	// MinEventDelta: an event differs when its counts per unit differ by this
	// much, or one side is zero and the other is not.
	MinEventDelta = 0.25
	// MinOnlyShare: a function "only on one side" is on at least this share
	// of that side's data-path samples (and absent from the other summary,
	// i.e. under profile.MinInclusiveShare there).
	MinOnlyShare = 0.01
	// SentenceStages is how many stages the sentence names at most.
	SentenceStages = 3
)

// Side is one cell of the comparison.
type Side struct {
	Label string           `json:"label"`
	Cell  *results.Cell    `json:"-"`
	P     *results.Profile `json:"-"`
}

// StageDiff is one stage on both sides, µs per unit.
type StageDiff struct {
	Stage       string  `json:"stage"`
	Name        string  `json:"name"`
	A           float64 `json:"a_us"`
	B           float64 `json:"b_us"`
	Delta       float64 `json:"delta_us"` // B - A
	Z           float64 `json:"z"`        // Delta over its sampling noise
	Significant bool    `json:"significant"`
}

// EventDiff is an event per unit on both sides.
type EventDiff struct {
	Name string  `json:"name"`
	A    float64 `json:"a_per_unit"`
	B    float64 `json:"b_per_unit"`
}

// OnlyFunction is a function on one side's stacks and not the other's.
type OnlyFunction struct {
	Name  string  `json:"name"`
	Stage string  `json:"stage,omitempty"`
	US    float64 `json:"inclusive_us_per_unit"`
	Share float64 `json:"share"` // of that side's data-path samples
}

// Explanation is the comparison of B against A.
type Explanation struct {
	Test     string         `json:"test"`
	Unit     string         `json:"unit"` // per-unit basis: transaction or MB
	A        Side           `json:"a"`
	B        Side           `json:"b"`
	RateA    float64        `json:"rate_a"`
	RateB    float64        `json:"rate_b"`
	RateUnit string         `json:"rate_unit"`
	TotalA   float64        `json:"data_path_us_a"`
	TotalB   float64        `json:"data_path_us_b"`
	Stages   []StageDiff    `json:"stages"`
	Events   []EventDiff    `json:"events"`
	OnlyA    []OnlyFunction `json:"only_a"`
	OnlyB    []OnlyFunction `json:"only_b"`
	Sentence string         `json:"sentence"`
	// Enforcer is the NetworkPolicy enforcer's CPU of a pair on a policy
	// axis (explain --knob policies), when both cells are profiled.
	Enforcer *EnforcerCPU `json:"policy_enforcer,omitempty"`
}

// EnforcerCPU is the CPU per unit in the stages a NetworkPolicy
// enforcer's data path runs in (labpolicy.EnforcerCPU: its lab provider's
// Info.Stages) at A and at B, and its share of each data path.
type EnforcerCPU struct {
	Provider string  `json:"lab_provider"`
	Stages   string  `json:"stages"`
	A        float64 `json:"us_a"`
	B        float64 `json:"us_b"`
	ShareA   float64 `json:"share_a"`
	ShareB   float64 `json:"share_b"`
}

// Label names a cell for people: its mode, plus provider and Services when
// it is a service cell, its policy provider and sweep's point when it has
// them ("bridge:iptables{policies=1000}"), and its family when it is not
// IPv4 ("veth-routed/ipv6").
func Label(c *results.Cell) string { return labelAs(c, c.Family) }

// labelAs is c's label with the family written as fam ("" leaves it out).
func labelAs(c *results.Cell, fam string) string {
	l := c.Mode
	if c.Path != "" && c.Path != "pod" {
		l += "/" + c.Path
	}
	if c.Provider != "" {
		l += "/" + c.Provider
	}
	if c.ExtraServices > 0 {
		l += fmt.Sprintf("+%d", c.ExtraServices)
	}
	if c.PolicyProvider != "" {
		l += ":" + c.PolicyProvider
	}
	if c.Point != "" {
		l += "{" + c.Point + "}"
	}
	if fam != "" {
		l += "/" + fam
	}
	return l
}

// sideLabels name a and b for their comparison: when only their families
// differ, the IPv4 side says so too ("veth-routed/ipv4").
func sideLabels(a, b *results.Cell) (string, string) {
	if a.Family == b.Family {
		return Label(a), Label(b)
	}
	fam := func(c *results.Cell) string { return string(family.OfCell(c.Family)) }
	return labelAs(a, fam(a)), labelAs(b, fam(b))
}

// Compare explains b against a. Both cells need a profile over the same
// unit.
func Compare(a, b *results.Cell) (*Explanation, error) {
	for _, c := range []*results.Cell{a, b} {
		if c.Profile == nil || c.Profile.Units <= 0 {
			return nil, fmt.Errorf("cell %s %s has no profile: run it with --profile", Label(c), c.Test)
		}
	}
	pa, pb := a.Profile, b.Profile
	if pa.Unit != pb.Unit {
		return nil, fmt.Errorf("cells %s and %s are profiled per %s and per %s: compare cells of one kind of test", Label(a), Label(b), pa.Unit, pb.Unit)
	}
	la, lb := sideLabels(a, b)
	e := &Explanation{Test: b.Test, Unit: pa.Unit,
		A: Side{la, a, pa}, B: Side{lb, b, pb},
		RateA: a.Median, RateB: b.Median, RateUnit: b.Unit}
	if e.A.Label == e.B.Label {
		e.A.Label, e.B.Label = e.A.Label+" ("+a.Test+")", e.B.Label+" ("+b.Test+")"
	}
	e.stages()
	e.events()
	e.OnlyA = only(pa, pb)
	e.OnlyB = only(pb, pa)
	e.Sentence = e.sentence()
	return e, nil
}

func usPerSample(p *results.Profile) float64 { return 1e6 / float64(p.Hz) / p.Units }

// counted: the stages that are the data path's cost (the profiler's own
// tracepoint programs are not: they would not run without --profile).
func counted(c results.StageCost) bool { return profile.Counted(c.Kind) }

func (e *Explanation) stages() {
	pa, pb := e.A.P, e.B.P
	ids := map[string]string{}
	for _, p := range []*results.Profile{pa, pb} {
		for _, c := range p.Stages {
			ids[c.Stage] = c.Name
		}
	}
	// The rules' order, then stages of an older rules file.
	var order []string
	for _, id := range profile.DefaultRules.Order() {
		if _, ok := ids[id]; ok {
			order = append(order, id)
			delete(ids, id)
		}
	}
	for _, p := range []*results.Profile{pa, pb} {
		for _, c := range p.Stages {
			if _, ok := ids[c.Stage]; ok {
				order = append(order, c.Stage)
				delete(ids, c.Stage)
			}
		}
	}
	names := map[string]string{}
	for _, p := range []*results.Profile{pa, pb} {
		for _, c := range p.Stages {
			names[c.Stage] = c.Name
		}
	}
	for _, id := range order {
		ca, cb := pa.Stage(id), pb.Stage(id)
		if counted(ca) || counted(cb) {
			e.TotalA += ca.US
			e.TotalB += cb.US
		}
		d := StageDiff{Stage: id, Name: names[id], A: ca.US, B: cb.US, Delta: cb.US - ca.US}
		// Poisson noise of each side's count, in µs per unit.
		sa, sb := usPerSample(pa), usPerSample(pb)
		if sd := math.Sqrt(float64(ca.Samples)*sa*sa + float64(cb.Samples)*sb*sb); sd > 0 {
			d.Z = d.Delta / sd
		}
		d.Significant = math.Abs(d.Z) >= MinZ && math.Abs(d.Delta) >= MinStageUS &&
			(counted(ca) || counted(cb))
		e.Stages = append(e.Stages, d)
	}
}

func (e *Explanation) events() {
	// A's events, then those only B counted (fib6_table_lookup against a
	// profile of an IPv4 cell recorded before it was counted).
	names := map[string]bool{}
	var order []string
	for _, p := range []*results.Profile{e.A.P, e.B.P} {
		for _, ev := range p.Events {
			if !names[ev.Name] {
				names[ev.Name] = true
				order = append(order, ev.Name)
			}
		}
	}
	for _, name := range order {
		a, b := e.A.P.Event(name).PerUnit, e.B.P.Event(name).PerUnit
		if math.Abs(b-a) >= MinEventDelta || (a == 0) != (b == 0) {
			e.Events = append(e.Events, EventDiff{name, a, b})
		}
	}
	for _, p := range []struct {
		x, y *results.Profile
		swap bool
	}{{e.A.P, e.B.P, false}, {e.B.P, e.A.P, true}} {
		for _, d := range p.x.Drops {
			var other float64
			for _, o := range p.y.Drops {
				if o.Name == d.Name {
					other = o.PerUnit
				}
			}
			if p.swap && other != 0 {
				continue // listed from A's side already
			}
			a, b := d.PerUnit, other
			if p.swap {
				a, b = other, d.PerUnit
			}
			if math.Abs(b-a) >= 0.01 {
				e.Events = append(e.Events, EventDiff{"drop:" + d.Name, a, b})
			}
		}
	}
}

// only lists x's functions that y's summary does not have.
func only(x, y *results.Profile) []OnlyFunction {
	var out []OnlyFunction
	for _, f := range x.Functions {
		share := float64(f.Inclusive) / float64(max(x.DataPath, 1))
		if share < MinOnlyShare || strings.HasPrefix(f.Name, "[user ") {
			continue
		}
		if g, ok := y.Function(f.Name); ok && g.Inclusive > 0 {
			continue
		}
		out = append(out, OnlyFunction{Name: f.Name, Stage: f.Stage, US: f.InclusiveUS, Share: share})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].US > out[j].US })
	return out
}

// stageEvents: the events that measure a stage's work, cited beside it.
var stageEvents = map[string][]string{
	"routing": {profile.EventFibLookup, profile.EventFib6Lookup},
	"veth":    {profile.EventNetifRx},
	"netdev":  {profile.EventNetDevXmit},
	"napi":    {profile.EventNapiPoll},
	"macvlan": {profile.EventNetDevXmit},
}

func (e *Explanation) event(name string) (EventDiff, bool) {
	for _, ev := range e.Events {
		if ev.Name == name {
			return ev, true
		}
	}
	return EventDiff{}, false
}

// sentence says how much more or less CPU B spends per unit than A and
// which stages (significant beyond sampling noise) make it, citing per
// stage the function whose self time moved most and the events that
// count that stage's work.
func (e *Explanation) sentence() string {
	delta := e.TotalB - e.TotalA
	unit := e.Unit
	verb := "more"
	if delta < 0 {
		verb = "less"
	}
	s := fmt.Sprintf("%s spends %.2f µs %s data-path CPU per %s than %s (%.2f vs %.2f µs",
		e.B.Label, math.Abs(delta), verb, unit, e.A.Label, e.TotalB, e.TotalA)
	if e.RateA > 0 {
		s += fmt.Sprintf("; rate %.3gx", e.RateB/e.RateA)
	}
	s += ")"
	var parts []string
	var sig []StageDiff
	for _, d := range e.Stages {
		if d.Significant && (d.Delta > 0) == (delta > 0) {
			sig = append(sig, d)
		}
	}
	sort.Slice(sig, func(i, j int) bool { return math.Abs(sig[i].Delta) > math.Abs(sig[j].Delta) })
	if len(sig) > SentenceStages {
		sig = sig[:SentenceStages]
	}
	for _, d := range sig {
		p := fmt.Sprintf("%+.2f µs %s", d.Delta, d.Name)
		var why []string
		if f := e.movedFunction(d.Stage, delta > 0); f != "" {
			why = append(why, f)
		}
		for _, ev := range stageEvents[d.Stage] {
			if x, ok := e.event(ev); ok {
				why = append(why, fmt.Sprintf("%s %s vs %s per %s", ev, num(x.B), num(x.A), unit))
			}
		}
		if len(why) > 0 {
			p += " (" + strings.Join(why, "; ") + ")"
		}
		parts = append(parts, p)
	}
	switch {
	case len(parts) > 0:
		s += ": " + strings.Join(parts, ", ")
	default:
		s += "; no stage differs beyond sampling noise"
	}
	var offset []StageDiff
	for _, d := range e.Stages {
		if d.Significant && (d.Delta > 0) != (delta > 0) {
			offset = append(offset, d)
		}
	}
	sort.Slice(offset, func(i, j int) bool { return math.Abs(offset[i].Delta) > math.Abs(offset[j].Delta) })
	var rest []string
	for _, d := range offset {
		rest = append(rest, fmt.Sprintf("%+.2f µs %s", d.Delta, d.Name))
	}
	if len(rest) > 0 {
		s += "; partly offset by " + strings.Join(rest, ", ")
	}
	return s + "."
}

// movedFunction names the function of stage whose self µs per unit moved
// most in the direction of the total, "name 0.31 vs 0.02 µs self" or
// "name only in B" when A's summary lacks it.
func (e *Explanation) movedFunction(stage string, up bool) string {
	best, bestD := "", 0.0
	for _, side := range []*results.Profile{e.A.P, e.B.P} {
		for _, f := range side.Functions {
			if f.Stage != stage {
				continue
			}
			fa, _ := e.A.P.Function(f.Name)
			fb, _ := e.B.P.Function(f.Name)
			d := fb.SelfUS - fa.SelfUS
			if (d > 0) == up && math.Abs(d) > math.Abs(bestD) {
				bestD = d
				_, inA := e.A.P.Function(f.Name)
				_, inB := e.B.P.Function(f.Name)
				switch {
				case inB && !inA:
					best = fmt.Sprintf("%s %.2f µs self, not on %s's stacks", f.Name, fb.SelfUS, e.A.Label)
				case inA && !inB:
					best = fmt.Sprintf("%s %.2f µs self on %s, not on %s's", f.Name, fa.SelfUS, e.A.Label, e.B.Label)
				default:
					best = fmt.Sprintf("%s %.2f vs %.2f µs self", f.Name, fb.SelfUS, fa.SelfUS)
				}
			}
		}
	}
	return best
}

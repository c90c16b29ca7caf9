package runner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// The knobs of a spec: which points of the sweep a test takes
// (appliesTo), which labs the points need (labGroups) and the knobs'
// checks. Where each knob's value lands is its field of knob.Settings,
// which Spec embeds (the registry, knob.All, says which).

// at is s with the point's values set.
func (s Spec) at(p knob.Point) Spec {
	s.Settings = s.Settings.WithPoint(p)
	return s
}

// appliesTo says whether test t is measured at point p: a point that moves
// a knob t does not take (load, on a stream test) away from its axis's
// base would measure t again as at the base.
func (s Spec) appliesTo(p knob.Point, t engine.Test) bool {
	for i, a := range s.Sweep.Axes {
		if i >= len(p) || p[i].Value == a.Base() {
			continue
		}
		for _, n := range a.Knobs {
			if k, _ := knob.Get(string(n)); k.RequestResponseOnly && !t.RequestResponse() {
				return false
			}
		}
	}
	return true
}

// labGroup is the points of the sweep that share one setting of the lab
// knobs and one policy set: they share a lab (per policy provider).
type labGroup struct {
	Lab    knob.Values
	Policy knob.PolicySet
	Points []knob.Point
}

// SetsLinks says whether the spec sets a lab knob, plainly or in its
// sweep (a cluster's links and pods are its CNI's: kube run refuses them).
func (s Spec) SetsLinks() bool {
	return slices.ContainsFunc(s.labGroups(), func(g labGroup) bool { return !g.Lab.IsZero() })
}

// PolicyGroup is the points of the sweep that share one policy set.
type PolicyGroup struct {
	Set    knob.PolicySet
	Points []knob.Point
}

// PolicyGroups are the sweep's points by policy set, in the points' order
// (a run without policies: one group of every point and the zero set);
// a cluster run measures a namespace of its own per group
// (internal/kube/bench/policies.go), as a lab run builds a lab per group.
func (s Spec) PolicyGroups() []PolicyGroup {
	var out []PolicyGroup
	for _, g := range s.labGroups() {
		i := slices.IndexFunc(out, func(o PolicyGroup) bool { return o.Set == g.Policy })
		if i < 0 {
			out = append(out, PolicyGroup{Set: g.Policy})
			i = len(out) - 1
		}
		out[i].Points = append(out[i].Points, g.Points...)
	}
	return out
}

// labGroups groups the sweep's points by the lab knobs' values (their
// canonical string, knob.Values) and the policies they need, in the
// points' order.
func (s Spec) labGroups() []labGroup {
	var out []labGroup
	for _, p := range s.Sweep.Points() {
		at := s.at(p)
		i := slices.IndexFunc(out, func(g labGroup) bool { return g.Lab == at.Lab && g.Policy == at.Policy })
		if i < 0 {
			out = append(out, labGroup{Lab: at.Lab, Policy: at.Policy})
			i = len(out) - 1
		}
		out[i].Points = append(out[i].Points, p)
	}
	return out
}

// checkKnobs refuses, before anything is built, a knob out of range (each
// knob's own check, knob.Settings.CheckRanges), a sweep that sweeps a knob twice,
// and BIG TCP on a kernel without it.
func (s Spec) checkKnobs() error {
	if err := s.Settings.CheckRanges(); err != nil {
		return err
	}
	if err := s.Sweep.Check(); err != nil {
		return field.Errorf("sweep", "{sweep}: %v", err)
	}
	if err := s.checkRate(); err != nil {
		return err
	}
	groups := s.labGroups()
	for _, g := range groups {
		gso, gro := knob.Int(g.Lab.Get(knob.GSO)), knob.Int(g.Lab.Get(knob.GRO))
		if gso > knob.LegacyGSO || gro > knob.LegacyGSO {
			if err := kernel.BigTCPIPv4(); err != nil {
				key := knob.GSO
				if gso <= knob.LegacyGSO {
					key = knob.GRO
				}
				if s.Sweep.Sweeps(key) {
					return field.Errorf("sweep", "{sweep} %s above %d is BIG TCP, which this kernel cannot do for IPv4 (%v): sweep %s up to %d", key, knob.LegacyGSO, err, key, knob.LegacyGSO)
				}
				return field.Errorf(string(key), "{%s} above %d is BIG TCP, which this kernel cannot do for IPv4 (%v): use %d or less", key, knob.LegacyGSO, err, knob.LegacyGSO)
			}
		}
	}
	return nil
}

// checkRate refuses a rate the run's tests cannot all take in one sense:
// for rr/crr tests it is an open loop's requests per second, for UDP
// streams bits per second, and tcp_stream takes none; so a rate (plain or
// swept, other than max) beside rr/crr tests refuses every stream test,
// and on tcp_stream alone it is refused too.
func (s Spec) checkRate() error {
	var rates []string
	for _, p := range s.Sweep.Points() {
		if r := s.at(p).Rate; r != "" && r != knob.Unlimited && !slices.Contains(rates, r) {
			rates = append(rates, r)
		}
	}
	if len(rates) == 0 {
		return nil
	}
	key, shown := string(knob.Rate), rates[0]
	if s.Sweep.Sweeps(knob.Rate) {
		key, shown = "sweep", string(knob.Rate)+"="+rates[0]
	}
	var rr, streams []string
	udp := false
	for _, t := range s.Tests {
		if t.RequestResponse() {
			rr = append(rr, string(t))
			continue
		}
		streams = append(streams, string(t))
		udp = udp || t != engine.TCPStream
	}
	switch {
	case len(rr) > 0 && len(streams) > 0:
		return field.Errorf(key, "{%s} %s is an open loop's requests per second for %s, a rate stream tests (%s) cannot take: measure them apart ({tests} %s)",
			key, shown, strings.Join(rr, ", "), strings.Join(streams, ", "), strings.Join(rr, ","))
	case len(rr) == 0 && !udp:
		return field.Errorf(key, "{%s} %s: tcp_stream takes no rate (it sends as fast as it can); drop it, or measure udp_stream or rr/crr tests", key, shown)
	case len(rr) == 0:
		for _, r := range rates {
			if _, share := knob.RateShare(r); share {
				return field.Errorf(key, "{%s} %s: a share of the path's closed-loop maximum is for rr/crr tests; give %s bits per second (500M)", key, r, strings.Join(streams, ", "))
			}
		}
	}
	return nil
}

// LoadProbeRate is the rate of the rr/crr probe under load (as
// flent's RRUL shape): when a run sets or sweeps load, its rr/crr tests
// that have no rate of their own (max) run open-loop at it, at every
// point, idle too, so the idle and loaded cells are measured alike and a
// stall under load costs every request that waited. 5000/s gives 10^4
// latencies, enough for a p99.9, from a 2 s sample.
const LoadProbeRate = "5000"

// LoadProbeFlows are the probe's flows (at least): 100 requests/s each, so
// a flow's next request is due 10 ms after its last, and only a wait
// longer than that (a queue, not a tail of a few ms) holds it back.
const LoadProbeFlows = 50

// probe is the rate and flows test t's engine d gets from s:
// LoadProbeRate over LoadProbeFlows for the latency-under-load probe,
// else s's own.
func (s Spec) probe(t engine.Test, d engine.Driver) (rate string, streams int) {
	underLoad := s.Load > 0 || s.Sweep.Sweeps(knob.Load)
	if underLoad && t.RequestResponse() && (s.Rate == "" || s.Rate == knob.Unlimited) && engine.OpenLoop(d) {
		return LoadProbeRate, max(s.Streams, LoadProbeFlows)
	}
	return s.Rate, s.Streams
}

// proveKnobs records lab l's knobs as the lab holds them, for every one
// of its cells: the proof the lab took when it set its knobs, else every
// lab knob read back (what the mode built).
func (p *plan) proveKnobs(l *lab.Lab) error {
	proof := l.State.Knobs
	if proof == nil {
		path, err := l.State.KnobPath()
		if err != nil {
			return fmt.Errorf("%s: %w", l.State.Name, err)
		}
		found, err := knob.Read(path, "")
		if err != nil {
			return fmt.Errorf("%s: %w", l.State.Name, err)
		}
		proof = &knob.Proof{Proofs: found}
	}
	if p.knobs == nil {
		p.knobs = map[string]*knob.Proof{}
	}
	p.knobs[l.State.Name] = proof
	return nil
}

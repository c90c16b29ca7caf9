package runner

import (
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/knob"
	"github.com/vnetlab/vnetlab/internal/pktstat"
	"github.com/vnetlab/vnetlab/internal/results"
)

// The one boundary between the measuring packages and the results file:
// what an engine, the knobs and the packet counter produce in their own
// types becomes internal/results' types here (the profiler's stacks
// become a results.Profile in profile.Summarize, which finishProfiles
// calls), so that a field renamed in any of them never changes the file's
// format (results.TestSchemaGolden pins that format). Where the two types have the
// same fields the conversion is Go's own, so that a field added on one side
// only fails to compile here.

// resultOf is an engine's result as a sample records it.
func resultOf(r engine.Result) results.Result { return results.Result(r) }

// linksOf is the links' knobs as the file records them.
func linksOf(l knob.Links) results.Links { return results.Links(l) }

// linkProofOf is a lab's links' proof as its cells record it (nil for nil).
func linkProofOf(p *knob.Proof) *results.LinkProof {
	if p == nil {
		return nil
	}
	out := &results.LinkProof{Requested: linksOf(p.Requested), NotApplied: p.NotApplied}
	for _, l := range p.Links {
		out.Links = append(out.Links, results.LinkState(l))
	}
	return out
}

// packetsOf is the packet counter's proof as a cell records it (nil for nil).
func packetsOf(p *pktstat.Proof) *results.Packets {
	if p == nil {
		return nil
	}
	side := func(s *pktstat.Side) *results.PacketSide {
		if s == nil {
			return nil
		}
		r := results.PacketSide(*s)
		return &r
	}
	return &results.Packets{Sender: side(p.Sender), Receiver: side(p.Receiver), Note: p.Note}
}

// sweepOf is the run's sweep as the file records it (nil without one).
func sweepOf(s knob.Sweep) *results.Sweep {
	if len(s.Axes) == 0 {
		return nil
	}
	out := &results.Sweep{Cross: s.Cross}
	for _, a := range s.Axes {
		ra := results.Axis{Values: a.Values}
		for _, k := range a.Knobs {
			ra.Knobs = append(ra.Knobs, string(k))
		}
		out.Axes = append(out.Axes, ra)
	}
	return out
}

package runner

import (
	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// ConvergenceOf is a converge run (kube converge, svc converge, policy
// converge) as its file records it, with its rows (analysis.ConvergeRows);
// a cluster's facts are the caller's to add. It says through say how many
// of the changes the machine's other work disturbed, if any.
func ConvergenceOf(r *converge.Run, say func(string, ...any)) *results.Convergence {
	c := &results.Convergence{
		Proxy:                  r.Proxy,
		PolicyProvider:         r.PolicyProvider,
		Policies:               r.Policies,
		IPBlocks:               r.IPBlocks,
		Start:                  r.Start,
		End:                    r.End,
		IntervalUS:             r.IntervalUS,
		Pause:                  r.Pause,
		ProbeConntrackTimeoutS: r.ProbeConntrackTimeoutS,
		Changes:                changesOf(r.Changes),
		Transitions:            each(r.Transitions, func(t converge.Transition) results.Transition { return results.Transition(t) }),
		ProxySyncs:             eachValue(r.ProxySyncs, func(p converge.ProxySyncs) results.ProxySyncs { return results.ProxySyncs(p) }),
		Scale:                  scaleOf(r.Scale),
		OtherWork:              otherWorkOf(r.OtherWork),
	}
	if r.CRR != nil {
		crr := results.NewestCRR(*r.CRR)
		c.CRR = &crr
	}
	if r.Controller != nil {
		c.Controller = analysis.ControllerShare(r.Controller.LatencyUS, r.Controller.NotApplied)
	}
	c.Rows = analysis.ConvergeRows(c)
	if seqs := analysis.Disturbed(c); len(seqs) > 0 {
		say("converge: warning: other work on this machine used more than %.1f CPUs while %d of the changes were measured (the report names it): measure again on an idle machine", analysis.DisturbedCPUs, len(seqs))
	}
	return c
}

// Reanalyze pairs c's changes with its own transitions again, and sums up
// its rows, with this version's analysis: what ConvergenceOf recorded when a
// file written by an older version was measured.
func Reanalyze(c *results.Convergence) {
	changes := each(c.Changes, measuredChange)
	ts := each(c.Transitions, func(t results.Transition) converge.Transition { return converge.Transition(t) })
	converge.Pair(changes, converge.ByNode(ts), c.End.UnixNano())
	c.Changes = changesOf(changes)
	c.Rows = analysis.ConvergeRows(c)
}

// changesOf are a run's changes as the file records them.
func changesOf(cs []converge.Change) []results.Change {
	return each(cs, func(ch converge.Change) results.Change {
		return results.Change{Seq: ch.Seq, Kind: ch.Kind, Target: ch.Target, Written: ch.Written, WriteUS: ch.WriteUS, Shows: ch.Shows,
			LatencyUS: ch.LatencyUS, NotApplied: ch.NotApplied, ShownBefore: ch.ShownBefore, MetricUS: ch.MetricUS,
			Conns: eachValue(ch.Conns, func(fs []converge.ConnFate) []results.ConnFate {
				return each(fs, func(f converge.ConnFate) results.ConnFate { return results.ConnFate(f) })
			})}
	})
}

// measuredChange is a file's change as the run measured it (Reanalyze).
func measuredChange(ch results.Change) converge.Change {
	return converge.Change{Seq: ch.Seq, Kind: ch.Kind, Target: ch.Target, Written: ch.Written, WriteUS: ch.WriteUS, Shows: ch.Shows,
		LatencyUS: ch.LatencyUS, NotApplied: ch.NotApplied, ShownBefore: ch.ShownBefore, MetricUS: ch.MetricUS,
		Conns: eachValue(ch.Conns, func(fs []results.ConnFate) []converge.ConnFate {
			return each(fs, func(f results.ConnFate) converge.ConnFate { return converge.ConnFate(f) })
		})}
}

// scaleOf is a cluster run's background as the file records it.
func scaleOf(s *converge.Scale) *results.Scale {
	if s == nil {
		return nil
	}
	return &results.Scale{Services: s.Services, Endpoints: s.Endpoints, Reused: s.Reused, CreateSeconds: s.CreateSeconds,
		APIBytesPerService: s.APIBytesPerService, BPFMapBytes: s.BPFMapBytes, BPFMapParts: s.BPFMapParts,
		Use: each(s.Use, func(u converge.DaemonUse) results.DaemonUse { return results.DaemonUse(u) })}
}

// otherWorkOf is the machine's other work as the file records it.
func otherWorkOf(o *converge.OtherWork) *results.OtherWork {
	if o == nil {
		return nil
	}
	return &results.OtherWork{Phases: o.Phases, ReadSeconds: o.ReadSeconds,
		Samples: each(o.Samples, func(s converge.OtherWorkSample) results.OtherWorkSample { return results.OtherWorkSample(s) }),
		Top:     each(o.Top, func(n converge.NamedCPU) results.NamedCPU { return results.NamedCPU(n) })}
}

// each is xs, each converted by f (nil stays nil: the file writes null or
// [] as the run had it).
func each[A, B any](xs []A, f func(A) B) []B {
	if xs == nil {
		return nil
	}
	out := make([]B, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

// eachValue is m, each value converted by f (nil stays nil).
func eachValue[K comparable, A, B any](m map[K]A, f func(A) B) map[K]B {
	if m == nil {
		return nil
	}
	out := make(map[K]B, len(m))
	for k, v := range m {
		out[k] = f(v)
	}
	return out
}

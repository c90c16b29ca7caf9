package netpol

import (
	"slices"
	"strings"
)

// A pod's rules are its segments put end to end: the Allows each policy
// selecting it gives it (each side's), in the policies' key order, as
// Compile's. The Compiler keeps each kept pod's segments, so that putting
// its rules together again makes only the segments of the policies that
// came, went or were resolved again, compares only those, and knows the
// Allows that came and went (the pod's AllowDelta) without comparing the
// rest: a pod 10,000 policies select costs a walk over their segments and
// a copy, not 10,000 comparisons.

// segment is the Allows one policy gave one pod, each side's (nil: none,
// or the policy does not isolate that side), at the policy's gen.
type segment struct {
	ps     *policyState
	gen    uint64
	in, eg []*Allow
}

// segmentOf is policy ps's segment of pod.
func segmentOf(pod *Pod, ps *policyState) segment {
	s := segment{ps: ps, gen: ps.gen}
	if ps.in {
		s.in = ruleAllows(pod, ps.ingress)
	}
	if ps.eg {
		s.eg = ruleAllows(pod, ps.egress)
	}
	return s
}

// ruleAllows are the Allows rules give pod, end to end: a rule's own
// slice when it is the only one giving any (a policy of one rule, which
// most are, costs no copy).
func ruleAllows(pod *Pod, rules []ruleForm) []*Allow {
	var out []*Allow
	shared := false
	for i := range rules {
		a := rules[i].allows(pod)
		switch {
		case len(a) == 0:
		case out == nil:
			out, shared = a, true
		default:
			if shared {
				out, shared = slices.Clone(out), false
			}
			out = append(out, a...)
		}
	}
	return out
}

// same says whether two segments give the same Allows.
func (s segment) same(o segment) bool {
	return Side{Allow: s.in}.Equal(Side{Allow: o.in}) && Side{Allow: s.eg}.Equal(Side{Allow: o.eg})
}

// assemble is pod's rules put together again from its segments (st), nil
// when they are had's (nil: none); d is the Allows that came and went
// since had, nil when had is nil or its addresses or isolation differ.
// The segments kept from had are copied from had's Allows in runs.
func (c *Compiler) assemble(pod *Pod, st *podState, had *PodRules) (r *PodRules, d *AllowDelta) {
	whole := st.whole || had == nil
	st.whole = false
	old, segs := st.segs, st.spare[:0]
	d = &AllowDelta{}
	var pieces []piece
	var at [2]int // where old[j]'s Allows start in had's sides
	pass := func(s segment) {
		at[0] += len(s.in)
		at[1] += len(s.eg)
	}
	keep := func(s segment) {
		if n := len(pieces); n > 0 && pieces[n-1].kept && pieces[n-1].to == at {
			pieces[n-1].to = [2]int{at[0] + len(s.in), at[1] + len(s.eg)}
			return
		}
		pieces = append(pieces, piece{kept: true, from: at, to: [2]int{at[0] + len(s.in), at[1] + len(s.eg)}})
	}
	j := 0
	for _, ps := range st.by {
		for j < len(old) && old[j].ps != ps && strings.Compare(old[j].ps.key, ps.key) < 0 {
			d.went(old[j])
			pass(old[j])
			j++
		}
		mine := j < len(old) && (old[j].ps == ps || old[j].ps.key == ps.key)
		if mine && !whole && old[j].ps == ps && old[j].gen == ps.gen {
			segs = append(segs, old[j])
			keep(old[j])
			pass(old[j])
			j++
			continue
		}
		s := segmentOf(pod, ps)
		if mine {
			if !old[j].same(s) {
				d.went(old[j])
				d.came(s)
			}
			pass(old[j])
			j++
		} else {
			d.came(s)
		}
		segs = append(segs, s)
		pieces = append(pieces, piece{seg: s})
	}
	for ; j < len(old); j++ {
		d.went(old[j])
	}
	clear(old) // the spare holds no policy's Allows alive
	st.segs, st.spare = segs, old[:0]
	r = join(pod, had, segs, pieces)
	if had != nil && !sameShape(had, r) {
		return r, nil
	}
	if d.empty() {
		if had != nil {
			return nil, nil
		}
		return r, nil
	}
	if had != nil && len(had.Ingress.Allow) == len(r.Ingress.Allow) && len(had.Egress.Allow) == len(r.Egress.Allow) && had.Equal(r) {
		return nil, nil // other policies' segments, the same Allows
	}
	if had == nil {
		d = nil
	}
	return r, d
}

// piece is a run of a pod's Allows: kept, had's from from to to (each
// side's), else a segment made again.
type piece struct {
	kept     bool
	from, to [2]int
	seg      segment
}

// join is pod's rules from its segments (segs, for the isolation) as
// pieces: those kept copied from had.
func join(pod *Pod, had *PodRules, segs []segment, pieces []piece) *PodRules {
	pr := &PodRules{Pod: pod.Name, Namespace: pod.Namespace, IPs: slices.Clone(pod.IPs)}
	for i := range segs {
		pr.Ingress.Isolated = pr.Ingress.Isolated || segs[i].ps.in
		pr.Egress.Isolated = pr.Egress.Isolated || segs[i].ps.eg
	}
	// The Allows counted first: a pod many policies select has as many.
	var n [2]int
	for _, p := range pieces {
		if p.kept {
			n[0] += p.to[0] - p.from[0]
			n[1] += p.to[1] - p.from[1]
		} else {
			n[0] += len(p.seg.in)
			n[1] += len(p.seg.eg)
		}
	}
	for k, side := range []*Side{&pr.Ingress, &pr.Egress} {
		// Compile leaves an Allow list that nothing was added to nil.
		if n[k] == 0 {
			continue
		}
		side.Allow = make([]*Allow, 0, n[k])
		var was []*Allow
		if had != nil {
			was = []Side{had.Ingress, had.Egress}[k].Allow
		}
		for _, p := range pieces {
			switch {
			case p.kept:
				side.Allow = append(side.Allow, was[p.from[k]:p.to[k]]...)
			default:
				// One at a time: most segments are one Allow, and
				// appending a slice of one costs a call.
				for _, a := range p.seg.side(k) {
					side.Allow = append(side.Allow, a)
				}
			}
		}
	}
	return pr
}

// side is the segment's Allows of side k (0: ingress, 1: egress).
func (s segment) side(k int) []*Allow {
	if k == 0 {
		return s.in
	}
	return s.eg
}

// sameShape says whether two rules of a pod have the same addresses and
// isolation, so that they differ in their Allows alone.
func sameShape(a, b *PodRules) bool {
	return slices.Equal(a.IPs, b.IPs) && a.Ingress.Isolated == b.Ingress.Isolated && a.Egress.Isolated == b.Egress.Isolated
}

package netpol

import "slices"

// AllowDelta is what a change did to a pod's Allows, when it kept the
// pod's addresses and isolation: each side's Allows that came and went, as
// multisets (an Allow may be in both: a policy updated that keeps it). A
// data plane that keeps its entries per Allow changes them by the delta
// alone, without comparing the pod's rules before and after.
type AllowDelta struct {
	Ingress, Egress SideDelta
}

// SideDelta is one side's Allows that came and went.
type SideDelta struct {
	Came, Went []*Allow
}

func (d *AllowDelta) came(s segment) {
	d.Ingress.Came = append(d.Ingress.Came, s.in...)
	d.Egress.Came = append(d.Egress.Came, s.eg...)
}

func (d *AllowDelta) went(s segment) {
	d.Ingress.Went = append(d.Ingress.Went, s.in...)
	d.Egress.Went = append(d.Egress.Went, s.eg...)
}

func (d *AllowDelta) empty() bool {
	return len(d.Ingress.Came)+len(d.Ingress.Went)+len(d.Egress.Came)+len(d.Egress.Went) == 0
}

// add appends o's Allows to d's: two changes one after the other.
func (d *AllowDelta) add(o *AllowDelta) {
	for _, p := range []struct{ to, from *SideDelta }{{&d.Ingress, &o.Ingress}, {&d.Egress, &o.Egress}} {
		p.to.Came = append(p.to.Came, p.from.Came...)
		p.to.Went = append(p.to.Went, p.from.Went...)
	}
}

// podWas is a changed pod's rules when the compiler's changes were last
// taken (nil: none), and the Allows that came and went since (nil:
// unknown).
type podWas struct {
	rules *PodRules
	delta *AllowDelta
}

// note notes that pod k's rules change from had (nil: none), by delta d
// (nil: unknown).
func (c *Compiler) note(k PodKey, had *PodRules, d *AllowDelta) {
	w, seen := c.was[k]
	switch {
	case !seen:
		w = podWas{rules: had, delta: d}
	case w.delta != nil && d != nil:
		w.delta.add(d)
	default:
		w.delta = nil
	}
	c.was[k] = w
	c.changed[k] = true
}

// Changes takes the pods whose rules were added, changed or removed since
// Changes or Changed last took them, sorted, each with its rules then
// (Old) and now (New) and, when the compiler knows it, the Allows that
// came and went between them (Delta: the pod kept its addresses and
// isolation). A pod changed and changed back is among them, Old and New
// equal.
func (c *Compiler) Changes() []PodChange {
	keys := c.changedKeys()
	out := make([]PodChange, 0, len(keys))
	for _, k := range keys {
		w := c.was[k]
		ch := PodChange{Key: k, Old: w.rules, New: c.rules[k], Delta: w.delta}
		if ch.Old == nil || ch.New == nil || !sameShape(ch.Old, ch.New) {
			ch.Delta = nil
		}
		out = append(out, ch)
	}
	clear(c.changed)
	clear(c.was)
	return slices.Clip(out)
}

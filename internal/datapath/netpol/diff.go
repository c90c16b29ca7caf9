package netpol

import "strings"

// PodChange is one pod's rules before and after a change: Old is nil when
// the pod had no rules (it is new, or was not kept), New when it has none
// now. A data plane that writes per pod writes only its changes.
type PodChange struct {
	Key      PodKey
	Old, New *PodRules
	// Delta, when not nil, is the Allows that came and went between Old
	// and New, which have the same addresses and isolation (a Compiler's
	// Changes knows it; Diff does not).
	Delta *AllowDelta
}

// Diff is the pods whose rules differ between old and new (nil: no
// rules), sorted by namespace and name. Rules that share their Allows (a
// Compiler's unchanged pods') compare at once.
func Diff(old, new *Rules) []PodChange {
	var a, b []PodRules
	if old != nil {
		a = old.Pods
	}
	if new != nil {
		b = new.Pods
	}
	var out []PodChange
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var c int
		switch {
		case i == len(a):
			c = 1
		case j == len(b):
			c = -1
		default:
			c = comparePods(&a[i], &b[j])
		}
		switch {
		case c < 0:
			out = append(out, PodChange{Key: PodKey{a[i].Namespace, a[i].Pod}, Old: &a[i]})
			i++
		case c > 0:
			out = append(out, PodChange{Key: PodKey{b[j].Namespace, b[j].Pod}, New: &b[j]})
			j++
		default:
			if !a[i].Equal(&b[j]) {
				out = append(out, PodChange{Key: PodKey{b[j].Namespace, b[j].Pod}, Old: &a[i], New: &b[j]})
			}
			i++
			j++
		}
	}
	return out
}

// comparePods orders two pods' rules as Rules holds them.
func comparePods(a, b *PodRules) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Pod, b.Pod)
}

// Hash is a hash of the Allow's content, the same in every process: a
// data plane that spreads a pod's Allows over buckets (so that a change
// rewrites only the buckets it touches) picks the bucket by it. An Allow
// the compiler made carries it (sealed): a pod of 10,000 Allows is
// spread without hashing them again at each change.
func (a Allow) Hash() uint64 {
	if a.key != 0 {
		return a.key
	}
	return a.fnv()
}

// sealed stores a's hash in it: the compiler's Allows, which nothing
// changes once made.
func sealed(a *Allow) *Allow {
	a.key = a.fnv()
	return a
}

func (a Allow) fnv() uint64 {
	// FNV-1a of the fields written out, in a buffer on the stack: a data
	// plane hashes every Allow of a changed pod.
	var buf [128]byte
	b := buf[:0]
	flag := func(v bool) {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	flag(a.AnyPeer)
	flag(a.AnyPort)
	for _, ip := range a.Pods {
		b = append(b, 'p')
		b = ip.AppendTo(b)
	}
	for _, blk := range a.Blocks {
		b = append(b, 'b')
		b = blk.CIDR.AppendTo(b)
		for _, e := range blk.Except {
			b = append(b, 'e')
			b = e.AppendTo(b)
		}
	}
	for _, r := range a.Ports {
		b = append(b, 'r')
		b = append(b, r.Proto...)
		b = append(b, 0, byte(r.First>>8), byte(r.First), byte(r.Last>>8), byte(r.Last))
	}
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

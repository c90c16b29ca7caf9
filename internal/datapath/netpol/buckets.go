package netpol

import "slices"

// Buckets are one side's Allows spread over n buckets by Hash, each
// bucket's in Allow order: a netfilter data plane's chains, so that a
// change rewrites only the buckets whose Allows changed (polnft and the
// lab's iptables provider keep a pod's Allows this way).
type Buckets struct {
	Allow []*Allow
	// Used are the non-empty buckets, in order.
	Used []int
	// keys are each Allow's bucket; bucket k's Allows are
	// at[start[k]:start[k+1]].
	keys, at, start []int32
}

// NewBuckets spreads allow over n buckets. The Allows allow shares with
// was (nil: none) at its start and its end (CommonEnds) take their
// buckets from it, unhashed: a policy's change moves a run of Allows in a
// long list.
func NewBuckets(allow []*Allow, n int, was *Buckets) *Buckets {
	b := &Buckets{Allow: allow, keys: make([]int32, len(allow)), at: make([]int32, len(allow)), start: make([]int32, n+1)}
	head, tail := 0, 0
	if was != nil {
		head, tail = CommonEnds(was.Allow, allow)
	}
	for i, a := range allow {
		switch {
		case i < head:
			b.keys[i] = was.keys[i]
		case i >= len(allow)-tail:
			b.keys[i] = was.keys[i-len(allow)+len(was.Allow)]
		default:
			b.keys[i] = int32(a.Hash() % uint64(n))
		}
		b.start[b.keys[i]+1]++
	}
	for k := range n {
		if b.start[k+1] > 0 {
			b.Used = append(b.Used, k)
		}
		b.start[k+1] += b.start[k]
	}
	next := slices.Clone(b.start)
	for i, k := range b.keys {
		b.at[next[k]] = int32(i)
		next[k]++
	}
	return b
}

// Key is Allow i's bucket.
func (b *Buckets) Key(i int) int { return int(b.keys[i]) }

// In is the indices of bucket k's Allows (none when b is nil).
func (b *Buckets) In(k int) []int32 {
	if b == nil {
		return nil
	}
	return b.at[b.start[k]:b.start[k+1]]
}

// Same says whether bucket k holds the same Allows in b and o.
func (b *Buckets) Same(o *Buckets, k int) bool {
	return slices.EqualFunc(b.In(k), o.In(k), func(i, j int32) bool { return b.Allow[i].Same(o.Allow[j]) })
}

// CommonEnds is how many Allows a and b share at their start (head) and,
// after those, at their end (tail).
func CommonEnds(a, b []*Allow) (head, tail int) {
	both := min(len(a), len(b))
	for head < both && a[head].Same(b[head]) {
		head++
	}
	for tail < both-head && a[len(a)-1-tail].Same(b[len(b)-1-tail]) {
		tail++
	}
	return head, tail
}

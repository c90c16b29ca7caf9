package stats

import (
	"math"
	"math/rand/v2"
	"slices"
)

// E-Divisive with means (Matteson D.S., James N.A., "A Nonparametric
// Approach for Multiple Change Point Analysis of Multivariate Data", JASA
// 109(505), 2014; the method of R's ecp::e.divisive, MongoDB's
// signal-processing-algorithms, Hunter and OpenShift's perf team), for one
// series with the moment index α = 1:
//
//   - the divergence of two samples X (m values) and Y (k values) is the
//     energy distance estimate (their eq. 5)
//     Ê(X,Y) = 2/(mk) Σ|Xi−Yj| − C(m,2)⁻¹ Σ_{i<l}|Xi−Xl| − C(k,2)⁻¹ Σ_{j<l}|Yj−Yl|,
//     and the statistic for splitting a segment into X then Y is the scaled
//     Q̂(X,Y) = mk/(m+k) · Ê(X,Y) (their eq. 6);
//   - one change point is the split τ̂ of a segment that maximises Q̂; more
//     are found hierarchically (their section 3.1): every segment between the
//     change points found so far proposes its best split, and the largest Q̂
//     among them is the candidate;
//   - a candidate is kept when a permutation test says it is significant
//     (their section 3.2): the values are shuffled within each current
//     segment, the same search finds the largest Q̂ of the shuffled series,
//     R times; p = (1 + #{Q̂_shuffled ≥ Q̂}) / (R + 1). The search stops at
//     the first candidate with p ≥ Alpha.
//
// Two choices are vnetlab's. Like MongoDB's and Hunter's implementations,
// the right end of the split is the segment's end (the paper also searches
// over an end κ, which costs a factor n). And segments are at least MinSize
// long, except that the series' last segment may be one value long
// (MinLastSize): a nightly job must see a change in its newest run the night
// it lands. The permutation test searches the same splits, so this changes
// the test's power, not its level: under no change a candidate is accepted
// with probability Alpha.

// EDivisiveOptions tune the search; zero values take the defaults.
type EDivisiveOptions struct {
	MinSize      int     // shortest segment (default 2: each side needs a pair for its within-distance)
	MinLastSize  int     // shortest last segment (default 1)
	Permutations int     // R (default 999: ecp's 199 leaves a p near 0.05 to luck)
	Alpha        float64 // significance level (default Alpha, 0.05)
	Seed         uint64  // the shuffles' seed (default Seed: the same series gives the same answer)
}

// WithDefaults is o with every zero (or negative) field at its default:
// what EDivisive runs with.
func (o EDivisiveOptions) WithDefaults() EDivisiveOptions {
	if o.MinSize < 2 {
		o.MinSize = 2
	}
	if o.MinLastSize < 1 {
		o.MinLastSize = 1
	}
	if o.Permutations <= 0 {
		o.Permutations = 999
	}
	if o.Alpha <= 0 {
		o.Alpha = Alpha
	}
	if o.Seed == 0 {
		o.Seed = Seed
	}
	return o
}

// ChangePoint is where a series changes: Index is the first value of the
// new segment.
type ChangePoint struct {
	Index int
	Q     float64 // the statistic Q̂ of the split
	P     float64 // the permutation test's p-value
}

// EDivisive finds the significant change points of xs, in index order.
func EDivisive(xs []float64, o EDivisiveOptions) []ChangePoint {
	o = o.WithDefaults()
	n := len(xs)
	var found []ChangePoint
	r := rand.New(rand.NewPCG(o.Seed, o.Seed^0x5eed))
	shuffled := make([]float64, n)
	for {
		cuts := cutsOf(found, n)
		best, q := bestSplit(xs, cuts, o)
		if best < 0 {
			return found
		}
		exceed := 0
		for range o.Permutations {
			copy(shuffled, xs)
			for i := 0; i+1 < len(cuts); i++ {
				seg := shuffled[cuts[i]:cuts[i+1]]
				r.Shuffle(len(seg), func(a, b int) { seg[a], seg[b] = seg[b], seg[a] })
			}
			// A shuffle that puts the same values on each side gives the same
			// Q̂, summed in another order: equal within rounding counts.
			if _, qs := bestSplit(shuffled, cuts, o); qs >= q-1e-9*math.Abs(q) {
				exceed++
			}
		}
		p := float64(1+exceed) / float64(1+o.Permutations)
		if p >= o.Alpha {
			return found
		}
		found = append(found, ChangePoint{Index: best, Q: q, P: p})
		slices.SortFunc(found, func(a, b ChangePoint) int { return a.Index - b.Index })
	}
}

// cutsOf are the segment bounds: 0, each change point, n.
func cutsOf(cps []ChangePoint, n int) []int {
	cuts := []int{0}
	for _, c := range cps {
		cuts = append(cuts, c.Index)
	}
	return append(cuts, n)
}

// bestSplit is the split with the largest Q̂ over every segment between
// cuts; -1 when no segment is long enough to split.
func bestSplit(xs []float64, cuts []int, o EDivisiveOptions) (int, float64) {
	best, bestQ := -1, math.Inf(-1)
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		minRight := o.MinSize
		if b == len(xs) {
			minRight = o.MinLastSize
		}
		if tau, q := splitSegment(xs[a:b], o.MinSize, minRight); tau >= 0 && q > bestQ {
			best, bestQ = a+tau, q
		}
	}
	return best, bestQ
}

// splitSegment is the τ maximising Q̂(seg[:τ], seg[τ:]) with at least
// minLeft values before τ and minRight from it; -1 when there is none. The
// three distance sums are carried from one τ to the next, O(n²) in all.
func splitSegment(seg []float64, minLeft, minRight int) (int, float64) {
	n := len(seg)
	if n < minLeft+minRight {
		return -1, 0
	}
	d := func(i, j int) float64 { return math.Abs(seg[i] - seg[j]) }
	// τ = 0: X empty, every pair within Y.
	var within, withinY, between float64
	for i := range n {
		for j := i + 1; j < n; j++ {
			withinY += d(i, j)
		}
	}
	best, bestQ := -1, math.Inf(-1)
	for tau := 1; tau < n; tau++ {
		// Move seg[tau-1] from Y to X.
		v := tau - 1
		var toX, toY float64
		for i := range v {
			toX += d(i, v)
		}
		for j := v + 1; j < n; j++ {
			toY += d(v, j)
		}
		within += toX
		withinY -= toY
		between += toY - toX
		m, k := float64(tau), float64(n-tau)
		if tau < minLeft || n-tau < minRight {
			continue
		}
		e := 2 * between / (m * k)
		if tau >= 2 {
			e -= within / (m * (m - 1) / 2)
		}
		if n-tau >= 2 {
			e -= withinY / (k * (k - 1) / 2)
		}
		if q := m * k / (m + k) * e; q > bestQ {
			best, bestQ = tau, q
		}
	}
	return best, bestQ
}

package rrbench

import (
	"math"
	"math/bits"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Histogram records durations in a fixed array of log-linear buckets (the
// HdrHistogram layout): exact below 128 ns, then 128 linear sub-buckets per
// power of two, so any recorded value is known to within 1/128 (0.8%).
// Recording never allocates; the array covers up to 2^41 ns (~36 min).
type Histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      uint64 // ns, for an exact mean (integer: no float add per record)
	min, max uint64
}

const (
	subBits     = 7
	subCount    = 1 << subBits // 128
	maxExp      = 41           // bits.Len64 of the largest value kept apart
	histBuckets = (maxExp - subBits + 1) * subCount
)

func bucketOf(v uint64) int {
	l := bits.Len64(v)
	if l <= subBits {
		return int(v)
	}
	if l > maxExp {
		return histBuckets - 1
	}
	k := l - subBits - 1 // width of a sub-bucket is 2^k
	return (k+1)*subCount + int(v>>uint(k)) - subCount
}

// bucketRange returns the [low, high) values of bucket i.
func bucketRange(i int) (uint64, uint64) {
	if i < subCount {
		return uint64(i), uint64(i) + 1
	}
	k := uint(i/subCount - 1)
	sub := uint64(i%subCount + subCount)
	return sub << k, (sub + 1) << k
}

// Record adds one duration (negative counts as 0).
func (h *Histogram) Record(d time.Duration) {
	v := uint64(0)
	if d > 0 {
		v = uint64(d)
	}
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Mean in nanoseconds (exact, not bucketed).
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return math.NaN()
	}
	return float64(h.sum) / float64(h.n)
}

// Min and Max in nanoseconds (exact).
func (h *Histogram) Min() uint64 { return h.min }
func (h *Histogram) Max() uint64 { return h.max }

// Percentile returns the value (ns) below or at which q percent of the
// recorded values lie (nearest rank), as the middle of its bucket clamped to
// the exact min and max.
func (h *Histogram) Percentile(q float64) float64 {
	if h.n == 0 {
		return math.NaN()
	}
	rank := uint64(math.Ceil(q / 100 * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			v := (float64(lo) + float64(hi-1)) / 2
			return math.Min(math.Max(v, float64(h.min)), float64(h.max))
		}
	}
	return float64(h.max)
}

// LatencyKeys are the latency summary keys, in display order.
var LatencyKeys = []string{"min", "mean", "p50", "p90", "p99", "p99.9", "max"}

// Summary returns the latency summary in microseconds: min, mean and max,
// and each quantile of results.LatencyQuantiles with its MinSamples or
// more samples behind it (the rest are left out: too few samples; p99.9
// needs 10^4).
func (h *Histogram) Summary() map[string]float64 {
	if h.n == 0 {
		return nil
	}
	us := func(ns float64) float64 { return math.Round(ns) / 1000 }
	out := map[string]float64{"min": us(float64(h.min)), "mean": us(h.Mean()), "max": us(float64(h.max))}
	for _, q := range results.LatencyQuantiles {
		if h.n >= uint64(q.MinSamples()) {
			out[q.Key] = us(h.Percentile(q.Percent))
		}
	}
	return out
}

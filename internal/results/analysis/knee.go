package analysis

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/results"
)

// The knee of a latency-versus-load curve: where a path's
// queues start to form as the offered load grows. One definition, for
// report and explain alike.

// KneeFactor: a p99 this many times the p99 at the lowest load is a queue
// forming (the samples' run-to-run spread of a p99 here is well under 2x).
const KneeFactor = 2.0

// KneeAchieved: a path that answers under this share of the offered rate
// has fallen behind it.
const KneeAchieved = 0.99

// Knee is a path's knee on its cells at increasing offered load (nil: not
// measured there): the lowest load whose p99 exceeds KneeFactor times the
// p99 at the first load measured, or whose achieved rate (the median over
// samples) falls below KneeAchieved of the rate offered. Index -1: no knee
// within the loads measured. Why says which, in words.
func Knee(cells []*results.Cell) (index int, why string) {
	base := -1.0
	for i, c := range cells {
		if c == nil || c.Valid == 0 {
			continue
		}
		offered := offeredRate(c)
		if offered > 0 && c.Median < KneeAchieved*offered {
			return i, fmt.Sprintf("achieved %.0f/s, under %.0f%% of the %.0f/s offered", c.Median, 100*KneeAchieved, offered)
		}
		p99, ok := c.Latency["p99"]
		if !ok {
			continue
		}
		if base < 0 {
			base = p99
			continue
		}
		if p99 > KneeFactor*base {
			return i, fmt.Sprintf("p99 %s µs, %.1fx the %s µs at the lowest load (over %gx)", us(p99), p99/base, us(base), KneeFactor)
		}
	}
	return -1, fmt.Sprintf("no knee: p99 within %gx of the lowest load's and every offered rate achieved", KneeFactor)
}

// us is a latency in µs, whole from 100 up.
func us(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// offeredRate is the rate a cell's open-loop samples offered (0: closed
// loop).
func offeredRate(c *results.Cell) float64 {
	for _, s := range c.Samples {
		if s.Valid && s.Schedule != nil {
			return s.Schedule.Offered
		}
	}
	return 0
}

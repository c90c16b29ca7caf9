package knob

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Rate is the offered rate: rr/crr requests/s (open loop); UDP streams bits/s.
const Rate Name = "rate"

func init() {
	register(Knob{Name: Rate, Scope: Engine, order: 80, Example: "20000", canonical: canonicalRate,
		Help:        "offered rate: rr/crr requests (connections) per second in all, open-loop, latency from each intended send time (20000 or 20k, up to 50000, or a share of each path's closed-loop maximum, measured first: 50%; docs/engines.md); udp_stream/udp_pps bits/s (iperf3 -b: 500M); max: closed loop, unlimited UDP",
		stringField: func(s *Settings) *string { return &s.Rate },
		check:       checkRate})
}

// Unlimited is the rate that sets no schedule: rr/crr tests closed-loop,
// UDP streams as fast as they go (the default).
const Unlimited = "max"

var (
	rateRE  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[kKmMgGtT]?$`)
	shareRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?%$`)
)

// canonicalRate checks a rate's spelling: max, a share of the path's own
// closed-loop maximum (50%: rr/crr tests, RateShare), or a positive number
// with an optional k/M/G/T (each test's engine reads it in its own unit and
// range: engine.OpenRate for rr/crr, iperf3's -b for UDP streams).
func canonicalRate(v string) (string, error) {
	if v == Unlimited {
		return v, nil
	}
	if shareRE.MatchString(v) {
		return canonicalShare(v)
	}
	if !rateRE.MatchString(v) {
		return "", fmt.Errorf("rate %q: use %s, requests per second for rr/crr (20000, 20k) or a share of the path's closed-loop maximum (50%%), or bits per second for UDP streams (500M)", v, Unlimited)
	}
	if n, _ := strconv.ParseFloat(strings.TrimRight(v, "kKmMgGtT"), 64); n <= 0 {
		return "", fmt.Errorf("rate %s: use a positive rate, or %s for none (closed loop, unlimited UDP)", v, Unlimited)
	}
	return v, nil
}

// canonicalShare checks a share of the maximum: above 0% and at most 100%.
// Above 100% is refused: an open loop that offers more than the path
// answers falls further behind every second, so its latency grows with
// the sample's length and says nothing of the path (an absolute rate
// measures past the maximum on purpose).
func canonicalShare(v string) (string, error) {
	n, _ := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	switch {
	case n <= 0:
		return "", fmt.Errorf("rate %s: use a share above 0%% of the path's closed-loop maximum (10%%, 50%%, 95%%)", v)
	case n > 100:
		return "", fmt.Errorf("rate %s is above the path's closed-loop maximum (100%%), where an open loop falls further behind every second and its latency measures the sample's length: use up to 100%%, or an absolute rate (20000)", v)
	}
	return strconv.FormatFloat(n, 'f', -1, 64) + "%", nil
}

// RateShare is the share of the path's closed-loop maximum a rate asks
// for (0.5 for "50%"), and whether it is one.
func RateShare(v string) (float64, bool) {
	if !shareRE.MatchString(v) {
		return 0, false
	}
	n, _ := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	return n / 100, true
}

// checkRate refuses a plain rate ("" is the default, max).
func checkRate(v string) error {
	if v == "" {
		return nil
	}
	if _, err := canonicalRate(v); err != nil {
		return field.Errorf(string(Rate), "{%s}: %v", Rate, err)
	}
	return nil
}

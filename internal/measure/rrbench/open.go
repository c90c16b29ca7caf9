package rrbench

import (
	"fmt"
	"math"
	"time"
)

// Open loop: requests (crr: connections) go out on a fixed
// schedule, Rate per second in all, whatever the answers do, as wrk2 sends
// them; each latency is measured from the request's intended send time,
// not from when it was sent. A closed loop stops asking while the server
// stalls, so a 100 ms stall costs it one slow sample; here every request
// scheduled during the stall waits for the rest of it and is recorded so
// (what HdrHistogram's recordValueWithExpectedInterval corrects for
// afterwards, done at the source).
//
// The schedule is spread over flows, each its own connection (crr: its own
// sequence of connections) with one request outstanding: a flow whose
// answer comes late sends its next requests as soon as it can, back to
// back, each still timed from its own intended time. Flow i of n sends its
// k-th request at (k·n + i)/Rate seconds after the common start, so the
// flows interleave evenly.

// OpenFlowRate is the most requests (crr: connections) per second one flow
// is given: OpenFlows(rate) = ceil(rate / OpenFlowRate). A flow sends its
// next request only once the last is answered; 1 ms apart, against a
// same-host round trip of 30-150 us here (crr: ~140 us), a flow is idle
// most of the time, so an ordinary answer never delays the next send and
// only a stall does.
const OpenFlowRate = 1000

// MinRate is the lowest open-loop rate: a flow of a slower schedule would
// sit longer than its TCP watchdog (tcpTimeout) between two requests.
const MinRate = 1

// MaxRate is the highest open-loop rate vnetlab schedules: about where
// client and server stop keeping up on this machine (2 vCPUs), so that a
// run above it would measure the client's own backlog, not the path.
// Measured with `vnetlab rr-client --rate R --duration 3s` against
// `rr-server --open-loop` on loopback in a scratch namespace, unpinned,
// load average 4.7 (shared machine), share of requests sent late: tcp_rr
// 0.9% at 40k/s, 3.3% at 50k, 12.6% at 60k, 71% at 80k; udp_rr 1.5% at
// 60k, 64% at 80k; tcp_crr 1.8% at 15k, 5.3% at 20k. Below it a path or
// a test that cannot keep up says so per sample (OpenLoop.Behind).
const MaxRate = 50000

// LateAfter: a request sent this long or longer after its intended time
// was sent late (the flow was behind its schedule). Far above the event
// loop's own wake-up lateness at its timerfd deadline (an hrtimer: tens of
// us on an idle CPU), so a late send is a real backlog.
const LateAfter = time.Millisecond

// BehindShare: a run with more than this share of its requests sent late,
// or any scheduled request left unsent, fell behind its schedule.
const BehindShare = 0.01

// CheckRate refuses an open-loop rate this engine cannot schedule.
func CheckRate(rate float64) error {
	switch {
	case math.IsNaN(rate) || rate <= 0:
		return fmt.Errorf("rate %g: use a positive number of requests per second", rate)
	case rate < MinRate:
		return fmt.Errorf("rate %g: the open loop sends at least %d request per second", rate, MinRate)
	case rate > MaxRate:
		return fmt.Errorf("rate %g is above %d/s, the most the rr engine schedules on this machine (docs/engines.md)", rate, MaxRate)
	}
	return nil
}

// OpenFlows is the number of flows an open loop at rate runs (at least
// streams, the flows asked for, at most MaxFlows).
// Each flow keeps MinRate at least: a sparser one would sit longer than
// its watchdog allows between two requests.
func OpenFlows(rate float64, streams int) int {
	n := max(int(math.Ceil(rate/OpenFlowRate)), streams, 1)
	return max(min(n, MaxFlows, int(rate/MinRate)), 1)
}

// OpenLoop is what an open-loop run scheduled and how well it kept to it.
type OpenLoop struct {
	Offered   float64 `json:"offered_rate"` // requests (crr: connections) per second scheduled
	Flows     int     `json:"flows"`
	Scheduled uint64  `json:"scheduled"` // requests whose intended time fell inside the run
	Sent      uint64  `json:"sent"`      // the rest were still waiting when it ended
	Late      uint64  `json:"late"`      // sent LateAfter or more after their intended time
	MaxLagUs  float64 `json:"max_lag_us"`
	Behind    bool    `json:"behind"` // more than BehindShare sent late, or any left unsent
}

// LateShare is the share of the scheduled requests sent late or not at all.
func (o *OpenLoop) LateShare() float64 {
	if o.Scheduled == 0 {
		return 0
	}
	return float64(o.Late+o.Scheduled-o.Sent) / float64(o.Scheduled)
}

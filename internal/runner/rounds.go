package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/pktstat"
	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

// The rounds of a run. Every round is one sample of every cell in turn,
// so that slow drifts of the machine touch every cell alike and two cells'
// samples of one round can be compared as a pair (analysis.CompareCells);
// the order within each round is drawn anew (randomized multiple
// interleaved trials), so that no cell always runs right after another
// and inherits what it leaves behind (a warm cache, TIME_WAIT sockets). Only the measured rounds make the statistics, and nothing of
// vnetlab's runs inside their windows: the packet counter that proves a
// cell's knobs is attached in the proof round only, the profiler in the
// profile rounds only (DESIGN.md: an instrument stays out of the measured
// window unless it costs under 0.2%; attached, the counter cost 10-14% of
// a tcp_rr, the profiler 3%).
type round int

const (
	warmupRound      round = iota // discarded
	warmupProofRound              // the last warm-up round: discarded, and the cells' proof
	proofRound                    // a round of its own when there is no warm-up: the cells' proof
	measuredRound                 // the statistics
	profileRound                  // --profile: after each measured round, profiled
)

// rounds are a run's rounds in order: the warm-up rounds, the last of
// them proving the cells (with none, a proof round of its own comes
// first), then each measured round followed, with --profile, by a
// profiled one. proof: the run counts packets (a lab's cells).
func (s Spec) rounds(proof bool) []round {
	var out []round
	for i := 0; i < s.Warmup; i++ {
		out = append(out, warmupRound)
	}
	if proof {
		if len(out) > 0 {
			out[len(out)-1] = warmupProofRound
		} else {
			out = append(out, proofRound)
		}
	}
	for i := 0; i < s.firstLook(); i++ {
		out = append(out, measuredRound)
		if s.Profile {
			out = append(out, profileRound)
		}
	}
	return out
}

// proves says whether the round counts packets.
func (r round) proves() bool { return r == warmupProofRound || r == proofRound }

// label is what the progress line adds to a sample's cell name.
func (r round) label() string {
	switch r {
	case warmupRound:
		return " (warmup)"
	case warmupProofRound:
		return " (warmup, proof)"
	case proofRound:
		return " (proof)"
	case profileRound:
		return " (profile)"
	}
	return ""
}

// mark is what a sample of the round records as its Round.
func (r round) mark() string {
	switch r {
	case warmupProofRound:
		return results.RoundWarmupProof
	case proofRound:
		return results.RoundProof
	case profileRound:
		return results.RoundProfile
	}
	return ""
}

// firstLook is how many measured rounds come first: Repeat, and in a
// precision run at least analysis.FirstLook before its first look.
func (s Spec) firstLook() int {
	if s.Summary.Precision > 0 {
		return max(s.Repeat, analysis.FirstLook)
	}
	return s.Repeat
}

// The cells' order within each round (Spec.Order).
const (
	OrderRandom = "random" // each round shuffled anew from Spec.OrderSeed
	OrderFixed  = "fixed"  // the plan's order in every round
)

// Orders lists Spec.Order's values, the default first.
var Orders = []string{OrderRandom, OrderFixed}

// place is a measured sample's round (1, 2, ...) and its slot in it; in
// a duet, the CPU its side runs on.
type place struct {
	round, slot int
	pins        *cpupin.Pins
}

// order deals each round's cells.
type order struct{ r *rand.Rand }

func newOrder(s Spec) order {
	if s.Order == OrderFixed {
		return order{}
	}
	return order{r: rand.New(rand.NewPCG(s.OrderSeed, s.OrderSeed))}
}

// deal is xs (a round's cells, or a duet's pairs) in the order of the
// next round.
func deal[T any](o order, xs []T) []T {
	if o.r == nil {
		return xs
	}
	out := slices.Clone(xs)
	o.r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// DrawnOrderSeed is the spec's seed, or one drawn now when it has none
// (0): set it before the run's metadata (Begin) so the file records the
// seed its rounds were shuffled with.
func (s Spec) DrawnOrderSeed() uint64 {
	if s.OrderSeed == 0 && s.Order != OrderFixed {
		return rand.Uint64() | 1
	}
	return s.OrderSeed
}

// ParseShare reads a share of a whole: "2%" or 0.02 (--precision).
func ParseShare(v string) (float64, error) {
	t := strings.TrimSpace(v)
	pct := strings.HasSuffix(t, "%")
	x, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a share: write it as 2%% or 0.02", v)
	}
	if pct {
		x /= 100
	}
	if x <= 0 || x >= 1 {
		return 0, fmt.Errorf("%q is not a share between 0 and 100%%: write it as 2%% or 0.02", v)
	}
	return x, nil
}

// roundRunner runs a run's rounds one by one: each round every cell once,
// in the round's order (a duet's measured rounds: two cells at once).
type roundRunner struct {
	spec  Spec
	cells []Planned
	pairs [][2]Planned // a duet's cells, two by two
	order order
	prog  Progress
	col   *profile.Collector
	meter NodeMeter
	pc    *pktstat.Counter

	step      int           // samples taken, for the progress
	measured  int           // measured rounds so far
	roundTime time.Duration // the measured rounds' (and their profile rounds') time so far
}

// run runs one round of kind r.
func (rr *roundRunner) run(ctx context.Context, r round) error {
	began := time.Now()
	if r == measuredRound || r == profileRound {
		defer func() { rr.roundTime += time.Since(began) }()
	}
	if r == measuredRound {
		rr.measured++
		if rr.spec.Duet {
			return rr.duetRound(ctx)
		}
	}
	for slot, c := range deal(rr.order, rr.cells) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if r == proofRound && !proves(c, rr.pc) {
			continue // a proof round skips the cells with nothing of their own to count (a cluster's)
		}
		if (r == measuredRound || r == profileRound) && notInForce(c) {
			continue // its policies are not proven in force: never measured as if they were
		}
		rr.step++
		rr.prog.Sample(rr.step, c.Cell.ID().String()+r.label())
		sample(ctx, rr.spec, c, r, rr.prog, rr.col, rr.meter, rr.pc, place{round: rr.measured, slot: slot + 1})
	}
	return nil
}

// notInForce: the cell's policies were not proven in force by its proof
// round, so it is never measured as if they were.
func notInForce(c Planned) bool { p := c.Cell.Policies; return p != nil && p.NotApplied != "" }

// untilPrecise is a precision run after its first rounds: it looks at the
// comparisons as analysis.NextLook says, and measures the rounds each
// look plans, within MaxTime of measured rounds; it returns the measured
// rounds at each look.
func (rr *roundRunner) untilPrecise(ctx context.Context) ([]int, error) {
	var looks []int
	perRound := 1 // a measured round and, profiled, its profile round
	if rr.spec.Profile {
		perRound = 2
	}
	for {
		looks = append(looks, rr.measured)
		o := rr.spec.Summary
		o.Looks = looks
		avg := rr.roundTime / time.Duration(max(rr.measured, 1))
		maxRounds := rr.measured + int((rr.spec.MaxTime-rr.roundTime)/max(avg, time.Millisecond))
		next, stop := analysis.NextLook(all(rr.cells), o, maxRounds)
		if stop {
			rr.prog.Note("precision: stopped after %d rounds (looks at %v)", rr.measured, looks)
			return looks, nil
		}
		why := "the widest comparison needs about"
		if next == maxRounds {
			why = "--max-time allows"
		}
		rr.prog.Note("precision: %d rounds so far; %s %d (%s a round)", rr.measured, why, next, avg.Round(time.Second))
		rr.prog.Begin(rr.step + (next-rr.measured)*perRound*len(rr.cells))
		for rr.measured < next && rr.roundTime < rr.spec.MaxTime {
			if err := rr.run(ctx, measuredRound); err != nil {
				return looks, err
			}
			if rr.spec.Profile {
				if err := rr.run(ctx, profileRound); err != nil {
					return looks, err
				}
			}
		}
	}
}

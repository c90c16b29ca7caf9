package runner

import "github.com/vnetlab/vnetlab/internal/results"

// The rounds of a run (issue 41). Every round is one sample of every cell
// in turn (A B C A B C ...), so that slow drifts of the machine touch every
// cell alike. Only the measured rounds make the statistics, and nothing of
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
	for i := 0; i < s.Repeat; i++ {
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

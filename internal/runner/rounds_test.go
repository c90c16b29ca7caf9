package runner

import (
	"slices"
	"testing"
)

// The rounds of a run: the proof is the last warm-up round, or a round of
// its own before the measured ones; a profile round follows each measured
// one; nothing proves or profiles a measured round.
func TestRounds(t *testing.T) {
	const w, wp, p, m, pr = warmupRound, warmupProofRound, proofRound, measuredRound, profileRound
	for _, tc := range []struct {
		warmup, repeat int
		proof, profile bool
		want           []round
	}{
		{0, 3, false, false, []round{m, m, m}},
		{0, 3, true, false, []round{p, m, m, m}},
		{2, 2, true, false, []round{w, wp, m, m}},
		{1, 2, true, true, []round{wp, m, pr, m, pr}},
		{0, 2, true, true, []round{p, m, pr, m, pr}},
		{2, 1, false, true, []round{w, w, m, pr}},
	} {
		s := Spec{Warmup: tc.warmup, Repeat: tc.repeat, Profile: tc.profile}
		if got := s.rounds(tc.proof); !slices.Equal(got, tc.want) {
			t.Errorf("warmup %d repeat %d proof %v profile %v: rounds %v, want %v", tc.warmup, tc.repeat, tc.proof, tc.profile, got, tc.want)
		}
	}
	for _, r := range []round{w, wp, p, m, pr} {
		if r == m && (r.proves() || r.mark() != "" || r.label() != "") {
			t.Errorf("a measured round proves (%v), is marked %q or labelled %q", r.proves(), r.mark(), r.label())
		}
		if r != m && r != w && r.mark() == "" {
			t.Errorf("instrumented round %d has no mark", r)
		}
	}
}

package runner

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
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

// A real precision run of two cells: the rounds are shuffled (each round
// holds each cell once, in an order that changes), every measured sample
// records its round and slot, the comparison is paired by round, and with
// a target the first look meets the run stops there and says so.
func TestRunPrecisionPairedRounds(t *testing.T) {
	requireLabs(t, testLabPrefix)
	spec := hostVethSpec(t, engine.TCPRR, 3)
	spec.OrderSeed, spec.MaxTime, spec.Summary = 42, time.Minute, analysis.Options{Precision: 0.5}
	f := runSpec(t, spec)
	st := f.Metadata.Settings
	if st.Order != OrderRandom || st.OrderSeed != 42 || st.Precision != 0.5 || !slices.Equal(st.Looks, []int{analysis.FirstLook}) {
		t.Errorf("settings: order %q seed %d precision %g looks %v, want random, 42, 0.5, [%d]", st.Order, st.OrderSeed, st.Precision, st.Looks, analysis.FirstLook)
	}
	if len(f.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(f.Cells))
	}
	firsts := map[string]int{}
	for r := 1; r <= analysis.FirstLook; r++ {
		slots := map[int]bool{}
		for _, c := range f.Cells {
			s := c.Samples[r-1]
			if s.RoundIndex != r || s.Slot < 1 || s.Slot > 2 {
				t.Fatalf("%s sample %d: round %d slot %d", c.Mode, r, s.RoundIndex, s.Slot)
			}
			slots[s.Slot] = true
			if s.Slot == 1 {
				firsts[c.Mode]++
			}
		}
		if len(slots) != 2 {
			t.Errorf("round %d: slots %v, want 1 and 2", r, slots)
		}
	}
	if len(firsts) != 2 {
		t.Errorf("the same cell came first in every round (%v): the order is not shuffled", firsts)
	}
	v := f.Cells[1].VsBaseline
	if v == nil || v.Method != analysis.MethodPaired || v.Test != "wilcoxon-signed-rank" || v.Pairs != analysis.FirstLook {
		t.Fatalf("veth-routed vs host: %+v, want paired over %d rounds", v, analysis.FirstLook)
	}
	if v.PrecisionMet == nil || !*v.PrecisionMet || v.MetAtRound != analysis.FirstLook || v.HalfWidth > 0.5 || v.Confidence != 1-analysis.LookAlphas[0] {
		t.Errorf("precision: met %v at %d, half-width %g, confidence %g", v.PrecisionMet, v.MetAtRound, v.HalfWidth, v.Confidence)
	}
}

// A duet refuses what cannot hold: one CPU for both sides, a stream test,
// a third mode, pins of its own.
func TestDuetRefuses(t *testing.T) {
	if _, err := duetCPUs([]int{0}); err == nil || !strings.Contains(err.Error(), "share one CPU") {
		t.Errorf("one CPU: %v, want a refusal naming the shared CPU", err)
	}
	if c, err := duetCPUs([]int{0, 1, 2}); err != nil || c != [2]int{1, 2} {
		t.Errorf("three CPUs: %v %v, want the last two", c, err)
	}
	two := []ModeVariant{{Label: "a", Mode: "veth-routed"}, {Label: "b", Mode: "bridge"}}
	for name, tc := range map[string]struct {
		s    Spec
		want string
	}{
		"stream":      {Spec{Duet: true, Modes: two, Tests: []engine.Test{engine.TCPRR, engine.TCPStream}, CPUAffinity: cpupin.MustParse(cpupin.Auto)}, "refuses tcp_stream"},
		"three modes": {Spec{Duet: true, Modes: append(two, ModeVariant{Label: "c", Mode: "macvlan"}), Tests: []engine.Test{engine.TCPRR}, CPUAffinity: cpupin.MustParse(cpupin.Auto)}, "3 are given"},
		"pinned":      {Spec{Duet: true, Modes: two, Tests: []engine.Test{engine.TCPRR}, CPUAffinity: cpupin.MustParse("0")}, "leave --cpu-affinity at auto"},
		"one cpu":     {Spec{Duet: true, Modes: two, Tests: []engine.Test{engine.TCPRR}, CPUAffinity: cpupin.MustParse(cpupin.Auto)}, "share one CPU"},
	} {
		allowed := []int{0, 1}
		if name == "one cpu" {
			allowed = []int{1}
		}
		if err := tc.s.checkDuet(allowed); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// A real duet: each round's two samples start together, on two CPUs
// swapped every round, without the machine's CPU counters (they hold
// both), marked duet and compared round by round.
func TestRunDuet(t *testing.T) {
	requireLabs(t, testLabPrefix)
	if a, _ := cpupin.Allowed(); len(a) < 2 {
		t.Skip("a duet needs two CPUs")
	}
	spec := hostVethSpec(t, engine.TCPRR, 6)
	spec.Duet, spec.CPUAffinity = true, cpupin.MustParse(cpupin.Auto)
	f := runSpec(t, spec)
	if !f.Metadata.Settings.Duet || len(f.Cells) != 2 {
		t.Fatalf("duet %v, %d cells", f.Metadata.Settings.Duet, len(f.Cells))
	}
	a, b := f.Cells[0], f.Cells[1]
	for _, c := range f.Cells {
		if c.Placement != results.PlacementDuet || len(c.Samples) != 6 {
			t.Fatalf("%s: placement %q, %d samples", c.Mode, c.Placement, len(c.Samples))
		}
	}
	for i := range 6 {
		sa, sb := a.Samples[i], b.Samples[i]
		if !sa.Valid || !sb.Valid || sa.CPU != nil || sb.CPU != nil || sa.RoundIndex != i+1 || sb.RoundIndex != i+1 {
			t.Fatalf("round %d: %+v / %+v", i+1, sa, sb)
		}
		if d := sa.Start.Sub(sb.Start).Abs(); d > 300*time.Millisecond {
			t.Errorf("round %d: the two samples started %s apart, want together", i+1, d)
		}
	}
	if v := b.VsBaseline; v == nil || v.Method != analysis.MethodPaired || v.Pairs != 6 {
		t.Errorf("veth-routed vs host: %+v, want paired over 6 rounds", v)
	}
}

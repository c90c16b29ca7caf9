package analysis

import (
	"math"
	"testing"
)

// within says got is want to tol: the hand-checked values are exact fractions.
func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// Compare on hand-checked data. {20,21,22,23} beside {10,11,12,13}: medians
// 21.5 and 11.5, ratio 1.869565; no overlap, 4 against 4, so the exact
// two-sided Mann-Whitney p is 2/C(8,4) = 2/70 = 0.028571 < 0.05: significant.
// Whether that is Better or Worse depends only on the unit's direction.
func TestCompareByHand(t *testing.T) {
	x, base := []float64{20, 21, 22, 23}, []float64{10, 11, 12, 13}
	c := Compare(x, base, true)
	if !within(c.Ratio, 21.5/11.5, 1e-12) || !within(c.P, 2.0/70, 1e-12) || !within(c.MinP, 2.0/70, 1e-12) {
		t.Errorf("ratio %g p %g min p %g, want 1.869565, 2/70, 2/70", c.Ratio, c.P, c.MinP)
	}
	if c.Verdict != Better || !c.Significant() || c.TooFew() {
		t.Errorf("rate up, significant: verdict %v significant %v too few %v, want better", c.Verdict, c.Significant(), c.TooFew())
	}
	// The ratio's interval cannot leave min(x)/max(base) .. max(x)/min(base) = 1.538 .. 2.3.
	if !c.HasCI || c.RatioCI[0] > c.Ratio || c.RatioCI[1] < c.Ratio || c.RatioCI[0] < 20.0/13-1e-9 || c.RatioCI[1] > 23.0/10+1e-9 {
		t.Errorf("ratio CI %v around %g", c.RatioCI, c.Ratio)
	}
	if v := Compare(x, base, false).Verdict; v != Worse {
		t.Errorf("latency up: verdict %v, want worse", v)
	}
	if v := Compare(base, x, false).Verdict; v != Better {
		t.Errorf("latency down: verdict %v, want better", v)
	}
}

// 3 against 3 values never reach p < 0.05 (smallest p 2/C(6,3) = 0.10): "~",
// and TooFew says why.
func TestCompareTooFew(t *testing.T) {
	c := Compare([]float64{4, 5, 6}, []float64{1, 2, 3}, true)
	if !within(c.P, 0.1, 1e-12) {
		t.Errorf("p %g, want 0.1", c.P)
	}
	if c.Verdict != Same || !c.TooFew() {
		t.Errorf("3 vs 3: verdict %v too few %v, want ~ and too few", c.Verdict, c.TooFew())
	}
	// 3 against 5: 2/C(8,3) = 2/56 = 0.0357 < 0.05, so a verdict is possible.
	if c := Compare([]float64{6, 7, 8}, []float64{1, 2, 3, 4, 5}, true); c.TooFew() || c.Verdict != Better {
		t.Errorf("3 vs 5 apart: verdict %v too few %v (min p %g), want better", c.Verdict, c.TooFew(), c.MinP)
	}
}

func TestCompareNoVerdict(t *testing.T) {
	if c := Compare(nil, []float64{1, 2}, true); c.Verdict != NoVerdict || c.Note != "no valid samples on one side" || !math.IsNaN(c.P) {
		t.Errorf("empty side: %+v", c)
	}
	if c := Compare([]float64{1, 2}, []float64{0, 0, 0}, true); c.Verdict != NoVerdict || c.Note != "baseline median is 0" {
		t.Errorf("zero baseline: %+v", c)
	}
	c := Compare([]float64{5, 5, 5}, []float64{5, 5, 5}, true)
	if c.Verdict != Same || c.P != 1 || c.Ratio != 1 {
		t.Errorf("identical samples: %+v, want ~ with p 1", c)
	}
	// One value a side: a ratio, but no interval (it would resample nothing).
	if c := Compare([]float64{12}, []float64{10}, true); c.HasCI || c.Ratio != 1.2 || c.Verdict != Same {
		t.Errorf("1 vs 1: %+v", c)
	}
}

func TestVerdictWords(t *testing.T) {
	for v, w := range map[Verdict]string{Better: "faster", Worse: "slower", Same: "~", Baseline: "baseline", NoVerdict: "n/a"} {
		if v.ResultsWord() != w || ParseVerdict(w) != v {
			t.Errorf("%v: results word %q, parsed back %v", v, v.ResultsWord(), ParseVerdict(w))
		}
	}
	if ParseVerdict("") != Same {
		t.Error(`an old file's empty verdict must read as "~"`)
	}
	if !HigherIsBetter("Gbit/s") || !HigherIsBetter("trans/s") || HigherIsBetter("us") {
		t.Error("unit directions wrong")
	}
}

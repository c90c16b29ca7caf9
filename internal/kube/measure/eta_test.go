package measure

import (
	"math"
	"testing"
	"time"
)

// TestGrowingETA: with a time per Service of a + b·n, the estimate from
// two intervals is that line's integral to the total; a rate that does not
// fall gives the constant-rate estimate.
func TestGrowingETA(t *testing.T) {
	a, b := 0.004, 1.4e-6 // seconds: 250/s at first, 1.4 µs more per Service present
	per := func(n float64) float64 { return a + b*n }
	var g growingETA
	g.left(1000, 100000, per(1000))
	got := g.left(20000, 100000, per(20000)).Seconds()
	want := a*80000 + b*(100000.0*100000-20000.0*20000)/2
	if math.Abs(got-want)/want > 0.01 {
		t.Fatalf("left from 20,000 to 100,000: %.0f s, want %.0f s (the integral of a + b·n)", got, want)
	}
	if constant := 80000 * per(20000); got < 2*constant {
		t.Fatalf("left %.0f s is not above twice the constant-rate %.0f s: the growth is not counted", got, constant)
	}
	var flat growingETA
	flat.left(1000, 5000, 0.01)
	if got := flat.left(3000, 5000, 0.009); got != 20*time.Second-2*time.Second {
		t.Fatalf("a rate that rose: left %s, want 18s (the latest rate held)", got)
	}
	for _, c := range []struct{ n, per float64 }{{5000, 0.01}, {100, 0}, {100, math.Inf(1)}} {
		if got := flat.left(c.n, 5000, c.per); got != 0 {
			t.Errorf("left(%v, 5000, %v) = %s, want 0 (done or unknown)", c.n, c.per, got)
		}
	}
}

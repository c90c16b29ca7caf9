package analysis

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

// world draws two cells' samples round by round, as a noisy machine gives
// them: each round a drift both cells share (lognormal, sd drift), then
// each sample's own noise (sd noise); x's true ratio to base is ratio.
type world struct {
	ratio, drift, noise float64
	r                   *rand.Rand
}

func (w world) round() (x, base float64) {
	d := math.Exp(w.r.NormFloat64() * w.drift)
	return 100 * w.ratio * d * math.Exp(w.r.NormFloat64()*w.noise), 100 * d * math.Exp(w.r.NormFloat64()*w.noise)
}

// t0 is when the synthetic runs start.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// roundCell is a cell whose samples carry their rounds (1, 2, ...), each
// round 10 s after the one before, and its slot's second in the round.
func roundCell(mode string, vals []float64, slot int) *results.Cell {
	c := cellOf(mode, vals...)
	for i := range c.Samples {
		c.Samples[i].RoundIndex, c.Samples[i].Slot = i+1, slot
		c.Samples[i].Start = t0.Add(time.Duration(10*i+slot) * time.Second)
	}
	return c
}

// Over 1,000 draws of 15 rounds from a machine whose drift dominates, the
// paired interval holds the true ratio in 95% ± 3% of them, and is
// narrower than the unpaired one (which counts the shared drift as noise
// twice) in most draws; the unpaired verdict misses the 5% difference that
// the paired one finds.
func TestPairedCoverage(t *testing.T) {
	const draws, rounds = 1000, 15
	w := world{ratio: 1.05, drift: 0.10, noise: 0.02, r: rand.New(rand.NewPCG(7, 11))}
	covered, narrower, pairedSig, unpairedSig := 0, 0, 0, 0
	for range draws {
		x, base := make([]float64, rounds), make([]float64, rounds)
		for i := range rounds {
			x[i], base[i] = w.round()
		}
		p := CompareCells(roundCell("b", x, 2), roundCell("a", base, 1), true)
		u := Compare(x, base, true)
		if p.Method != MethodPaired || p.Pairs != rounds || !p.HasCI {
			t.Fatalf("not paired: %+v", p)
		}
		if p.RatioCI[0] <= w.ratio && w.ratio <= p.RatioCI[1] {
			covered++
		}
		if p.HalfWidth() < u.HalfWidth() {
			narrower++
		}
		if p.Verdict == Better {
			pairedSig++
		}
		if u.Verdict == Better {
			unpairedSig++
		}
	}
	if cov := float64(covered) / draws; cov < 0.92 || cov > 0.98 {
		t.Errorf("paired 95%% interval held the true ratio in %.3f of %d draws, want 0.95 ± 0.03", cov, draws)
	}
	if narrower < draws*9/10 {
		t.Errorf("paired interval narrower than unpaired in %d of %d draws, want 90%% or more", narrower, draws)
	}
	if pairedSig < draws*9/10 || unpairedSig > draws/2 {
		t.Errorf("5%% faster found: paired %d, unpaired %d of %d draws", pairedSig, unpairedSig, draws)
	}
	t.Logf("coverage %.3f, paired narrower in %d, found: paired %d unpaired %d (of %d)", float64(covered)/draws, narrower, pairedSig, unpairedSig, draws)
}

// Cells without rounds (older files), with a round twice, or with fewer
// than MinPairs rounds in common are compared unpaired; a failed sample
// drops its round from the pairs.
func TestCompareCellsFallsBack(t *testing.T) {
	vals := []float64{10, 11, 12, 13, 14, 15, 16}
	if c := CompareCells(cellOf("b", vals...), cellOf("a", vals...), true); c.Method != MethodUnpaired {
		t.Errorf("no rounds: method %s", c.Method)
	}
	five := vals[:5]
	if c := CompareCells(roundCell("b", five, 2), roundCell("a", five, 1), true); c.Method != MethodUnpaired {
		t.Errorf("5 rounds: method %s, want unpaired (signed-rank needs %d)", c.Method, MinPairs)
	}
	twice := roundCell("b", vals, 2)
	twice.Samples[1].RoundIndex = 1
	if c := CompareCells(twice, roundCell("a", vals, 1), true); c.Method != MethodUnpaired {
		t.Errorf("a round twice: method %s", c.Method)
	}
	x, a := roundCell("b", append(vals, 17), 2), roundCell("a", append(vals, 17), 1)
	x.Samples[2].Valid, x.Samples[2].Error = false, "boom"
	if xs, bs := Pairs(x, a); len(xs) != 7 || len(bs) != 7 || xs[2] != 13 || bs[2] != 13 {
		t.Errorf("pairs without the failed round: %v %v", xs, bs)
	}
	// Two runs' rounds (kube run's configurations, one after the other):
	// the same numbers, never paired.
	later := roundCell("b", vals, 2)
	for i := range later.Samples {
		later.Samples[i].Start = later.Samples[i].Start.Add(time.Hour)
	}
	if c := CompareCells(later, roundCell("a", vals, 1), true); c.Method != MethodUnpaired {
		t.Errorf("rounds of another run: method %s", c.Method)
	}
}

// A/A on a noisy machine: the same path as two cells, a precision run's
// looks (NextLook) until ±2% or 150 rounds. Over 1,000 runs, at most 5%
// come out significant, although the run stopped whenever its intervals
// looked narrow; looking after every round at 95% instead gives 5.8-7.3%.
func TestSequentialFalsePositives(t *testing.T) {
	for _, noise := range []float64{0.02, 0.04} {
		w := world{ratio: 1, drift: 0.1, noise: noise, r: rand.New(rand.NewPCG(3, 5))}
		const runs = 1000
		fp, met, rounds := 0, 0, 0
		for range runs {
			a, b := roundCell("a", nil, 1), roundCell("b", nil, 2)
			add := func(n int) {
				for len(a.Samples) < n {
					x, base := w.round()
					i := len(a.Samples) + 1
					at := t0.Add(time.Duration(10*i) * time.Second)
					b.Samples = append(b.Samples, results.Sample{Result: results.Result{Value: x}, Valid: true, RoundIndex: i, Start: at.Add(2 * time.Second)})
					a.Samples = append(a.Samples, results.Sample{Result: results.Result{Value: base}, Valid: true, RoundIndex: i, Start: at.Add(time.Second)})
				}
			}
			o := Options{Precision: 0.02}
			n := FirstLook
			for {
				add(n)
				o.Looks = append(o.Looks, n)
				next, stop := NextLook([]*results.Cell{a, b}, o, 150)
				if stop {
					break
				}
				n = next
			}
			o.withDefaults().compareRun([]*results.Cell{a, b}) // Analyze's comparisons, without its bootstrap of each cell
			c := b.VsBaseline
			if c.Significant {
				fp++
			}
			if c.PrecisionMet != nil && *c.PrecisionMet {
				met++
			}
			rounds += len(a.Samples)
		}
		if rate := float64(fp) / runs; rate > 0.05 {
			t.Errorf("noise %.2f: %.3f of A/A precision runs significant, want 0.05 or less", noise, rate)
		}
		t.Logf("noise %.2f: false positives %.3f, met ±2%% %.2f, mean rounds %.1f", noise, float64(fp)/runs, float64(met)/runs, float64(rounds)/runs)
	}
}

// A round whose value is 0 (a valid sample that moved nothing) has no
// ratio: the cells are compared unpaired, and the file still writes (no
// infinite half-width).
func TestPairedZeroValueFallsBack(t *testing.T) {
	x := roundCell("b", []float64{0, 11, 12, 13, 14, 15, 16}, 2)
	base := roundCell("a", []float64{10, 11, 12, 13, 14, 15, 16}, 1)
	f := &results.File{SchemaVersion: results.SchemaVersion, Cells: []*results.Cell{base, x}}
	Analyze(f.Cells, Options{Precision: 0.02, Looks: []int{7}})
	if v := x.VsBaseline; v == nil || v.Method != MethodUnpaired || v.PrecisionMet != nil {
		t.Fatalf("a round with 0: %+v, want unpaired, outside the precision target", v)
	}
	if err := results.Write(filepath.Join(t.TempDir(), "r.json"), f); err != nil {
		t.Fatal(err)
	}
}

// Command bench-stats measures vnetlab's comparison methods on this
// machine: how often each calls a difference that is not there, how often
// its interval holds a known ratio, and how long it takes to reach ±2%.
//
// It runs vnetlab itself, a few long interleaved runs, and cuts each into
// short runs of --chunk rounds (each a run a user could have made), then
// compares their cells by every method:
//
//   - unpaired: each cell's samples as an independent sample (ratio of
//     medians, bootstrap CI, Mann-Whitney): vnetlab before rounds paired;
//   - paired: the ratio of each round's two samples (Hodges-Lehmann,
//     signed-rank CI and test), from the sequential rounds of one run;
//   - duet: paired, from a --duet run (both paths at once, a CPU each).
//
// A/A: the same mode as two labs ("a" and "b", veth-routed): every
// significant verdict is a false positive. Known differences: bridge and
// macvlan against veth-routed, their reference ratio the paired interval of
// the whole long run; a short run's interval should hold it. Time to ±2%:
// from each chunk's start, the rounds until the 95% interval's half-width
// is 2% or less, times the run's seconds per round.
//
//	go run ./tools/bench-stats -rounds 200 -ref-rounds 60 -dir /tmp/bench-stats
//
// It builds labs: run it under the machine's lab lock (make bench-stats).
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

func main() {
	var (
		bin       = flag.String("vnetlab", envOr("VNETLAB_BIN", "bin/vnetlab"), "the vnetlab binary measured")
		dir       = flag.String("dir", "bench-stats", "where the runs' results files go (kept, and reused with -reuse)")
		rounds    = flag.Int("rounds", 200, "rounds of each A/A run")
		refRounds = flag.Int("ref-rounds", 60, "rounds of each known-difference run (its whole is the reference)")
		chunk     = flag.Int("chunk", 10, "rounds of each short run cut from a long one")
		duration  = flag.Duration("duration", time.Second, "length of each sample")
		reuse     = flag.Bool("reuse", false, "analyse the results files already in -dir instead of measuring")
	)
	flag.Parse()
	if err := run(*bin, *dir, *rounds, *refRounds, *chunk, *duration, *reuse); err != nil {
		fmt.Fprintln(os.Stderr, "bench-stats:", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// A measured run: its name (its file), its vnetlab run arguments.
type measured struct {
	name string
	args []string
}

func run(bin, dir string, rounds, refRounds, chunk int, d time.Duration, reuse bool) error {
	if chunk < analysis.MinPairs {
		return fmt.Errorf("-chunk %d: a paired comparison needs %d rounds or more", chunk, analysis.MinPairs)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	aa := []string{"-f", "scenarios/bench-stats-aa.yaml", "--repeat", fmt.Sprint(rounds)}
	known := []string{"--tests", "tcp_rr,tcp_crr", "--repeat", fmt.Sprint(refRounds)}
	runs := []measured{
		{"aa", aa},
		{"aa-duet", append(slices.Clone(aa), "--duet")},
		{"known", append(slices.Clone(known), "--modes", "veth-routed,bridge,macvlan")},
		{"known-duet-bridge", append(slices.Clone(known), "--modes", "veth-routed,bridge", "--duet")},
		{"known-duet-macvlan", append(slices.Clone(known), "--modes", "veth-routed,macvlan", "--duet")},
	}
	load0 := loadavg()
	files := map[string]*results.File{}
	for _, m := range runs {
		path := filepath.Join(dir, m.name+".json")
		if !reuse {
			args := append([]string{"run", "--duration", d.String(), "-o", path}, m.args...)
			fmt.Fprintf(os.Stderr, "bench-stats: %s %s\n", bin, strings.Join(args, " "))
			cmd := exec.Command(bin, args...)
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
		}
		f, err := results.Read(path)
		if err != nil {
			return err
		}
		files[m.name] = f
	}
	fmt.Printf("bench-stats: %d-round A/A runs, %d-round known-difference runs, cut into short runs of %d rounds; samples of %s\n", rounds, refRounds, chunk, d)
	fmt.Printf("load average before %s, after %s\n\n", load0, loadavg())
	fmt.Println("| method | A/A comparisons | false positives | CI holds 1.0 | known-difference short runs | CI holds the reference | median time to ±2% |")
	fmt.Println("|---|---|---|---|---|---|---|")
	refs := references(files["known"])
	for _, m := range []struct {
		name      string
		aa        *results.File
		known     []*results.File
		pairedRun bool
	}{
		{"unpaired", files["aa"], []*results.File{files["known"]}, false},
		{analysis.MethodPaired, files["aa"], []*results.File{files["known"]}, true},
		{"duet", files["aa-duet"], []*results.File{files["known-duet-bridge"], files["known-duet-macvlan"]}, true},
	} {
		a := judgeAA(m.aa, chunk, m.pairedRun)
		k := judgeKnown(m.known, refs, chunk, m.pairedRun)
		fmt.Printf("| %s | %d | %d (%.1f%%) | %.1f%% | %d | %d (%.1f%%) | %s |\n", m.name, a.n, a.sig, pct(a.sig, a.n), pct(a.holds, a.n),
			k.n, k.holds, pct(k.holds, k.n), k.timeText())
	}
	fmt.Println()
	fmt.Println("references (paired, whole known run):")
	for _, key := range slices.Sorted(maps.Keys(refs)) {
		r := refs[key]
		fmt.Printf("  %s: %.3f [%.3f, %.3f] over %d rounds\n", key, r.Ratio, r.RatioCI[0], r.RatioCI[1], r.Pairs)
	}
	interference(files)
	return nil
}

func pct(a, n int) float64 {
	if n == 0 {
		return 0
	}
	return 100 * float64(a) / float64(n)
}

// pairsOf are f's comparisons: each non-baseline cell with its baseline
// cell of the same coordinates but placement (a duet's are all "duet").
func pairsOf(f *results.File) [][2]*results.Cell {
	base := results.Baseline(f.Cells, f.Metadata.Settings.Baseline)
	by := map[results.CellID]*results.Cell{}
	for _, c := range f.Cells {
		if c.Mode == base {
			id := c.ID()
			id.Mode = ""
			by[id] = c
		}
	}
	var out [][2]*results.Cell
	for _, c := range f.Cells {
		id := c.ID()
		id.Mode = ""
		if b, ok := by[id]; ok && c != b {
			out = append(out, [2]*results.Cell{c, b})
		}
	}
	return out
}

// keyOf names a comparison across runs (solo and duet alike).
func keyOf(c, b *results.Cell) string { return c.Mode + "/" + b.Mode + " " + c.Test }

// window is c with only its samples of rounds from..to-1.
func window(c *results.Cell, from, to int) *results.Cell {
	out := *c
	out.Samples = nil
	for _, s := range c.Samples {
		if s.RoundIndex >= from && s.RoundIndex < to {
			out.Samples = append(out.Samples, s)
		}
	}
	return &out
}

// compare is c against b by the method: paired (CompareCells) or not.
func compare(c, b *results.Cell, paired bool) analysis.Comparison {
	higher := analysis.HigherIsBetter(c.Unit)
	if paired {
		return analysis.CompareCells(c, b, higher)
	}
	return analysis.Compare(c.Values(), b.Values(), higher)
}

func roundsOf(c *results.Cell) int {
	n := 0
	for _, s := range c.Samples {
		n = max(n, s.RoundIndex)
	}
	return n
}

type aaResult struct{ n, sig, holds int }

func judgeAA(f *results.File, chunk int, paired bool) aaResult {
	var r aaResult
	for _, p := range pairsOf(f) {
		for from := 1; from+chunk-1 <= roundsOf(p[0]); from += chunk {
			c := compare(window(p[0], from, from+chunk), window(p[1], from, from+chunk), paired)
			if c.Verdict == analysis.NoVerdict {
				continue
			}
			r.n++
			if c.Significant() {
				r.sig++
			}
			if c.HasCI && c.RatioCI[0] <= 1 && 1 <= c.RatioCI[1] {
				r.holds++
			}
		}
	}
	return r
}

// references are the known run's paired comparisons over all its rounds.
func references(f *results.File) map[string]analysis.Comparison {
	out := map[string]analysis.Comparison{}
	for _, p := range pairsOf(f) {
		out[keyOf(p[0], p[1])] = compare(p[0], p[1], true)
	}
	return out
}

type knownResult struct {
	n, holds int
	seconds  []float64 // time to ±2% from each chunk's start
	never    int       // starts that never reached it within the run
}

func (k knownResult) timeText() string {
	if len(k.seconds) == 0 {
		return fmt.Sprintf("not reached (%d starts)", k.never)
	}
	s := fmt.Sprintf("%.0f s", stats.Median(k.seconds))
	if k.never > 0 {
		s += fmt.Sprintf(" (%d of %d starts never)", k.never, k.never+len(k.seconds))
	}
	return s
}

func judgeKnown(files []*results.File, refs map[string]analysis.Comparison, chunk int, paired bool) knownResult {
	var k knownResult
	for _, f := range files {
		perRound := secondsPerRound(f)
		for _, p := range pairsOf(f) {
			ref, ok := refs[keyOf(p[0], p[1])]
			if !ok {
				continue
			}
			n := roundsOf(p[0])
			for from := 1; from+chunk-1 <= n; from += chunk {
				c := compare(window(p[0], from, from+chunk), window(p[1], from, from+chunk), paired)
				if c.HasCI {
					k.n++
					if c.RatioCI[0] <= ref.Ratio && ref.Ratio <= c.RatioCI[1] {
						k.holds++
					}
				}
				reached := false
				for to := from + analysis.MinPairs; to <= n+1; to++ {
					if c := compare(window(p[0], from, to), window(p[1], from, to), paired); c.HalfWidth() <= 0.02 {
						k.seconds = append(k.seconds, float64(to-from)*perRound)
						reached = true
						break
					}
				}
				if !reached {
					k.never++
				}
			}
		}
	}
	return k
}

// secondsPerRound is the run's wall time over its measured rounds.
func secondsPerRound(f *results.File) float64 {
	var first, last time.Time
	rounds := 0
	for _, c := range f.Cells {
		for _, s := range c.Samples {
			if first.IsZero() || s.Start.Before(first) {
				first = s.Start
			}
			if s.Start.After(last) {
				last = s.Start
			}
			rounds = max(rounds, s.RoundIndex)
		}
	}
	if rounds < 2 {
		return 0
	}
	return last.Sub(first).Seconds() / float64(rounds-1)
}

// interference is what running beside another path cost each path: its
// duet cell's median over its solo cell's (two runs: a ratio of medians,
// unpaired).
func interference(files map[string]*results.File) {
	fmt.Println("\nwhat a duet costs each path (duet median / solo median, unpaired: two runs):")
	solo := map[string]*results.Cell{}
	for _, c := range files["known"].Cells {
		solo[c.Mode+" "+c.Test] = c
	}
	seen := map[string]bool{}
	for _, name := range []string{"known-duet-bridge", "known-duet-macvlan"} {
		for _, c := range files[name].Cells {
			k := c.Mode + " " + c.Test
			s, ok := solo[k]
			if !ok || seen[k] {
				continue
			}
			seen[k] = true
			cmp := analysis.Compare(c.Values(), s.Values(), analysis.HigherIsBetter(c.Unit))
			ci := "[no CI]"
			if cmp.HasCI {
				ci = fmt.Sprintf("[%.3f, %.3f]", cmp.RatioCI[0], cmp.RatioCI[1])
			}
			fmt.Printf("  %s: %.3f %s\n", k, cmp.Ratio, ci)
		}
	}
}

// loadavg is /proc/loadavg's first three fields.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

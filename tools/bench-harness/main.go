// Command bench-harness measures what vnetlab's harness costs the numbers
// it reports: `vnetlab run`, the whole command, against the
// standalone engine on the same paths, in interleaved rounds, every test
// pinned as run pins it (--cpu-affinity auto). Each round runs
//
//	vnetlab run --modes M,... --tests T,... --repeat 1 --duration D -o round.json
//
// (its own labs, its proof round, one measured sample per cell); each
// cell's engine with the same settings (runner.Spec.EngineSpec) and
// nothing of the harness around it, in labs brought up once as run brings
// them up (runner.Prepare: "standalone"); and the same engine in labs
// brought up that round, a first sample discarded as run's proof sample is
// ("fresh"). The order rotates each round. It prints three lines per
// cell, each a ratio of the medians with its bootstrap 95% CI: run / fresh
// (the harness alone, in labs as young as run's) and run / standalone (all
// that run differs by), each against the target (>= 0.99: what the
// harness may cost), and fresh / standalone (what a lab's age moves, no
// target); and the machine's load averages before and after:
//
//	harness veth-routed/pod/tcp_rr  run / fresh  0.998 [0.990, 1.006]  target >= 0.99  MET
//
// Run it through scripts/bench-harness.sh; it builds labs, so run it under
// the machine's lab lock.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
	"github.com/vnetlab/vnetlab/internal/runner"
)

// harnessTarget: run's numbers within 1% of the engine's own.
var harnessTarget = analysis.Target{Value: 0.99}

func main() {
	var (
		repeat   = flag.Int("repeat", 7, "interleaved rounds (samples per side); 5 or more")
		duration = flag.Duration("duration", 2*time.Second, "length of each sample")
		modes    = flag.String("modes", "veth-routed,bridge", "modes, comma-separated")
		tests    = flag.String("tests", "tcp_rr,udp_rr,tcp_crr,tcp_stream", "tests, comma-separated")
		extra    = flag.String("run-args", "", "more arguments for each vnetlab run, space-separated (e.g. --profile)")
	)
	flag.Parse()
	if err := run(*repeat, *duration, strings.Split(*modes, ","), strings.Split(*tests, ","), strings.Fields(*extra)); err != nil {
		fmt.Fprintln(os.Stderr, "bench-harness:", err)
		os.Exit(1)
	}
}

// side is one way of measuring, its samples by cell key.
type side struct {
	vals map[string][]float64
	errs map[string]int
}

func newSide() *side { return &side{vals: map[string][]float64{}, errs: map[string]int{}} }

func (s *side) add(key string, v float64, err error) {
	if err != nil {
		s.errs[key]++
		fmt.Fprintf(os.Stderr, "bench-harness: %s: sample failed: %v\n", key, err)
		return
	}
	s.vals[key] = append(s.vals[key], v)
}

func run(repeat int, dur time.Duration, modeNames, testNames []string, runArgs []string) error {
	if repeat < 5 {
		return fmt.Errorf("--repeat %d: use 5 or more (a ratio's CI needs samples)", repeat)
	}
	bin, err := engine.SelfBinary()
	if err != nil {
		return err
	}
	spec := runner.DefaultSpec()
	spec.Modes, spec.Duration, spec.Repeat, spec.LabPrefix = runner.Variants(modeNames, nil), dur, 1, "bh"
	spec.Tests = nil
	for _, n := range testNames {
		t, err := engine.ParseTest(n)
		if err != nil {
			return err
		}
		spec.Tests = append(spec.Tests, t)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	labs, err := runner.Prepare(ctx, spec, quiet{})
	if err != nil {
		return err
	}
	defer labs.Close()
	cells := labs.Cells()
	dir, err := os.MkdirTemp("", "bench-harness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Printf("bench-harness: %s run against the standalone engine, %s x %s, %d interleaved rounds of %s, every test pinned as run pins it (--cpu-affinity auto); load average before: %s\n",
		bin, strings.Join(modeNames, ","), strings.Join(testNames, ","), repeat, dur, cpu.LoadAvg())

	whole, alone, fresh := newSide(), newSide(), newSide()
	freshSpec := spec
	freshSpec.LabPrefix = "bf"
	for r := 0; r < repeat; r++ {
		steps := []func() error{
			func() error { return runRound(ctx, bin, dir, r, modeNames, testNames, dur, runArgs, whole) },
			func() error { standaloneRound(ctx, spec, cells, alone); return ctx.Err() },
			func() error { return freshRound(ctx, freshSpec, fresh) },
		}
		// Each round rotates the order, so no side is always first.
		for i := range steps {
			if err := steps[(i+r)%len(steps)](); err != nil {
				return err
			}
		}
		fmt.Fprintf(os.Stderr, "bench-harness: round %d of %d done\n", r+1, repeat)
	}
	fmt.Printf("bench-harness: load average after: %s\n", cpu.LoadAvg())
	for _, c := range cells {
		key := c.Cell.ID().String()
		w, a, f := whole.vals[key], alone.vals[key], fresh.vals[key]
		if len(w) < 2 || len(a) < 2 || len(f) < 2 {
			fmt.Printf("harness %s  n/a (valid samples: run %d, fresh %d, standalone %d)\n", key, len(w), len(f), len(a))
			continue
		}
		fmt.Printf("harness %s  run / fresh  %s\n", key, analysis.RatioLine(w, f, harnessTarget))
		fmt.Printf("        %s  run / standalone  %s\n", key, analysis.RatioLine(w, a, harnessTarget))
		fmt.Printf("        %s  fresh / standalone  %s  (a lab's age: no target)\n", key, analysis.RatioText(f, a))
		fmt.Fprintf(os.Stderr, "  %s: run median %.4g %s (CV %.1f%%: %s), fresh median %.4g (CV %.1f%%: %s), standalone median %.4g (CV %.1f%%: %s)\n", key,
			stats.Median(w), c.Cell.Unit, 100*stats.CV(w), list(w), stats.Median(f), 100*stats.CV(f), list(f), stats.Median(a), 100*stats.CV(a), list(a))
	}
	return nil
}

// freshRound brings up labs as run does (runner.Prepare), runs each
// cell's engine twice in them, the first discarded as run's proof sample
// is not counted, and removes them: the standalone engine in labs as young
// as run's, with the same traffic before, so that run / fresh is the
// harness alone and fresh / standalone what a lab's age moves.
func freshRound(ctx context.Context, spec runner.Spec, s *side) error {
	before := netnsCount()
	labs, err := runner.Prepare(ctx, spec, quiet{mute: true})
	if err != nil {
		return err
	}
	standaloneRound(ctx, spec, labs.Cells(), newSide())
	standaloneRound(ctx, spec, labs.Cells(), s)
	labs.Close()
	settle(before)
	return ctx.Err()
}

// runRound runs `vnetlab run` once, one measured sample of every cell, and
// files each cell's sample.
func runRound(ctx context.Context, bin, dir string, r int, modeNames, testNames []string, dur time.Duration, runArgs []string, s *side) error {
	out := filepath.Join(dir, fmt.Sprintf("round-%d.json", r+1))
	args := append([]string{"run", "--modes", strings.Join(modeNames, ","), "--tests", strings.Join(testNames, ","),
		"--repeat", "1", "--duration", dur.String(), "-o", out}, runArgs...)
	cmd := exec.CommandContext(ctx, bin, args...)
	log, err := os.Create(out + ".log")
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	// run exits 1 when a cell failed; its file says which.
	before := netnsCount()
	err = cmd.Run()
	settle(before)
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			return fmt.Errorf("%s run: %w", bin, err)
		}
	}
	f, err := results.Read(out)
	if err != nil {
		b, _ := os.ReadFile(out + ".log")
		return fmt.Errorf("%s run: %w: %s", bin, err, strings.TrimSpace(string(b)))
	}
	for _, c := range f.Cells {
		key := c.ID().String()
		if len(c.Samples) != 1 || !c.Samples[0].Valid {
			s.add(key, 0, fmt.Errorf("run round %d: no valid sample (%s)", r+1, sampleError(c)))
			continue
		}
		s.add(key, c.Samples[0].Value, nil)
	}
	return nil
}

// netnsCount is the machine's live network namespaces, dying ones
// included (the kernel's net_namespace slab); -1 when unreadable.
func netnsCount() int {
	b, err := os.ReadFile("/proc/slabinfo")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "net_namespace" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

// settle waits until the kernel has freed the namespaces of the run that
// just ended (it does so in the background, for a second or more after
// down returns), so that the next samples do not share the CPUs with that
// work: until the count is back to before (+2), or has not fallen for 2 s,
// or 30 s have passed.
func settle(before int) {
	if before < 0 {
		return
	}
	prev, flat := netnsCount(), 0
	for i := 0; i < 300 && prev > before+2 && flat < 20; i++ {
		time.Sleep(100 * time.Millisecond)
		cur := netnsCount()
		if cur >= prev {
			flat++
		} else {
			flat = 0
		}
		prev = cur
	}
}

func sampleError(c *results.Cell) string {
	for _, s := range c.Samples {
		if s.Error != "" {
			return s.Error
		}
	}
	return "none taken"
}

// standaloneRound runs every cell's engine once on the prepared labs, with
// the settings run gives it and nothing around it: no window, no counter,
// no progress.
func standaloneRound(ctx context.Context, spec runner.Spec, cells []runner.Planned, s *side) {
	for _, c := range cells {
		if ctx.Err() != nil {
			return
		}
		res, err := c.Driver.Run(ctx, c.Target, c.EngineSpec(spec))
		s.add(c.Cell.ID().String(), res.Value, err)
	}
}

// quiet is runner.Progress for Prepare: its notes only, none when mute
// (the fresh labs of every round).
type quiet struct{ mute bool }

func (quiet) Begin(int)          {}
func (quiet) Sample(int, string) {}
func (q quiet) Note(format string, args ...any) {
	if !q.mute {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}
func (quiet) End() {}

func list(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.FormatFloat(x, 'g', 4, 64))
	}
	return strings.Join(s, " ")
}

package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// The harness must not move what it measures: no BPF program
// vnetlab's run loads runs inside a measured sample's window. With the
// kernel's BPF statistics on, the run counts of every program this process
// holds (the packet counter's, the profiler's; a veth-routed lab has none
// of its own) are read at each sample's marks, from inside the runner's
// window. The counts must move in the windows that prove and profile
// (so the probe sees those programs run at all) and stay still in every
// measured one.

const harnessLabPrefix = "sth"

// windowProbe records what ran between the marks of every sample.
type windowProbe struct {
	mu      sync.Mutex
	windows []probedWindow
}

type probedWindow struct {
	cell    string
	at      time.Time
	runs    map[string]uint64 // program name (id) -> runs in the window
	selfCPU time.Duration     // this process's CPU (user + system) in the window
	wall    time.Duration
	err     error
}

// probed is an engine that runs the real rr engine with the probe's
// window inside the runner's.
type probed struct {
	real  engine.Driver
	probe *windowProbe
}

func (p *probed) Name() string                { return "sth-probed-rr" }
func (p *probed) Supports(t engine.Test) bool { return p.real.Supports(t) }
func (p *probed) Run(ctx context.Context, tg engine.Target, s engine.Spec) (engine.Result, error) {
	w := &probeWindow{probe: p.probe, cell: tg.ClientNS + ">" + tg.Addr}
	return p.real.Run(engine.WithWindow(ctx, w), tg, s)
}

type probeWindow struct {
	probe    *windowProbe
	cell     string
	start    time.Time
	runs     map[string]uint64
	err      error
	started  bool
	startCPU time.Duration
}

func (w *probeWindow) Start() {
	w.start, w.started = time.Now().UTC(), true
	w.runs, w.err = heldProgramRuns()
	if w.err == nil {
		w.startCPU, w.err = selfCPU()
	}
}

func (w *probeWindow) End() {
	if !w.started {
		return
	}
	cpu, terr := selfCPU()
	end, err := heldProgramRuns()
	pw := probedWindow{cell: w.cell, at: w.start, runs: map[string]uint64{}, wall: time.Since(w.start), err: w.err}
	if pw.err == nil {
		pw.err = err
	}
	if pw.err == nil {
		pw.err = terr
	}
	for k, n := range end {
		if d := n - w.runs[k]; d > 0 {
			pw.runs[k] = d
		}
	}
	pw.selfCPU = cpu - w.startCPU
	w.probe.mu.Lock()
	w.probe.windows = append(w.probe.windows, pw)
	w.probe.mu.Unlock()
}

// heldProgramRuns is the run count of every BPF program this process holds
// a descriptor of (a program's, or a link's to one), by "name (id)".
func heldProgramRuns() (map[string]uint64, error) {
	fds, err := os.ReadDir("/proc/self/fdinfo")
	if err != nil {
		return nil, err
	}
	ids := map[ebpf.ProgramID]bool{}
	for _, fd := range fds {
		b, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err != nil {
			continue // closed since the listing
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "prog_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					ids[ebpf.ProgramID(id)] = true
				}
			}
		}
	}
	out := map[string]uint64{}
	for id := range ids {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue // unloaded since
		}
		info, ierr := p.Info()
		st, serr := p.Stats()
		p.Close()
		if ierr != nil || serr != nil {
			return nil, fmt.Errorf("program %d: %v %v", id, ierr, serr)
		}
		out[fmt.Sprintf("%s (%d)", info.Name, id)] = st.RunCount
	}
	return out, nil
}

// selfCPU is this process's user + system time so far.
func selfCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

func TestNoHarnessProgramRunsInMeasuredWindow(t *testing.T) {
	requireLabs(t, harnessLabPrefix)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		t.Fatalf("enable BPF statistics: %v", err)
	}
	defer stats.Close()
	real, err := engine.Get("rr")
	if err != nil {
		t.Fatal(err)
	}
	probe := &windowProbe{}
	engine.Register(&probed{real: real, probe: probe})
	pods, err := lab.DefaultPodSpecs(lab.DefaultPods, lab.DefaultPodCIDR, 1)
	if err != nil {
		t.Fatal(err)
	}
	spec := DefaultSpec()
	spec.Modes, spec.Tests, spec.Engine = Variants([]string{"veth-routed"}, nil), []engine.Test{engine.TCPRR}, "sth-probed-rr"
	spec.Duration, spec.Repeat, spec.Pods, spec.LabPrefix = time.Second, 3, pods, harnessLabPrefix
	spec.Profile, spec.ProfileDir = true, t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, err := Run(ctx, spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cells) != 1 || f.Cells[0].Valid != spec.Repeat {
		t.Fatalf("cells %d, want one with %d valid samples", len(f.Cells), spec.Repeat)
	}
	c := f.Cells[0]
	probe.mu.Lock()
	defer probe.mu.Unlock()
	// A measured sample's window is the first probed one after its start.
	measured := map[int]bool{}
	for _, s := range c.Samples {
		for i, w := range probe.windows {
			if !w.at.Before(s.Start) {
				measured[i] = true
				break
			}
		}
	}
	if len(measured) != spec.Repeat {
		t.Fatalf("%d measured windows found among %d probed, want %d", len(measured), len(probe.windows), spec.Repeat)
	}
	instrumented := 0
	for i, w := range probe.windows {
		if w.err != nil {
			t.Fatalf("window %d: %v", i, w.err)
		}
		t.Logf("window %d (measured %v, %s): programs run %v; this process %s of CPU", i, measured[i], w.wall.Round(time.Millisecond), w.runs, w.selfCPU)
		if !measured[i] {
			if len(w.runs) > 0 {
				instrumented++
			}
			continue
		}
		if len(w.runs) > 0 {
			t.Errorf("measured window %d: vnetlab's BPF programs ran inside it: %v", i, w.runs)
		}
		// The runner waits for the engine's client: at most 2% of a CPU
		// (the kernel charges CPU in 10 ms ticks: never under two of them).
		if limit := max(20*time.Millisecond, w.wall/50); w.selfCPU > limit {
			t.Errorf("measured window %d: the runner's process used %s of CPU in %s, want at most %s", i, w.selfCPU, w.wall.Round(time.Millisecond), limit)
		}
	}
	// The probe sees the harness's programs where they belong: the proof
	// window (the packet counter) and the profile windows (the profiler).
	if instrumented < 1+spec.Repeat {
		t.Errorf("%d instrumented windows saw vnetlab's programs run, want %d (a proof window and %d profile windows): the probe cannot see them", instrumented, 1+spec.Repeat, spec.Repeat)
	}
}

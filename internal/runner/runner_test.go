package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results"
)

// flaky runs the real iperf3 driver but fails every third call, so each of
// two interleaved cells gets one failed sample: after the proof round (calls
// 1 and 2), A B A B A B fail at calls 3 (A's first sample) and 6 (B's second).
type flaky struct {
	real engine.Driver
	mu   sync.Mutex
	n    int
}

func (f *flaky) Name() string                { return "st-flaky" }
func (f *flaky) Supports(t engine.Test) bool { return f.real.Supports(t) }
func (f *flaky) Run(ctx context.Context, tg engine.Target, s engine.Spec) (engine.Result, error) {
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	if n%3 == 0 {
		return engine.Result{}, errors.New("st-flaky: deliberate failure")
	}
	return f.real.Run(ctx, tg, s)
}

type quiet struct{ t *testing.T }

func (q quiet) Begin(int)                       {}
func (q quiet) Sample(i int, l string)          { q.t.Logf("sample %d %s", i, l) }
func (q quiet) Note(format string, args ...any) { q.t.Logf(format, args...) }
func (q quiet) End()                            {}

const testLabPrefix = "sti" // this test's labs only, so cleanup never touches others

// requireLabs skips without root or iperf3 and, whatever happens (even a
// failed assertion mid-run), removes the labs whose names start with prefix
// when the test ends: each test file has its own, so cleanup never touches
// others.
func requireLabs(t *testing.T, prefix string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds network namespaces")
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed")
	}
	t.Cleanup(func() {
		states, _ := lab.List()
		for _, st := range states {
			if strings.HasPrefix(st.Name, prefix) {
				_ = lab.Down(st.Name, nil)
			}
		}
	})
}

// hostVethSpec is a run of test over two labs, host and veth-routed,
// repeat rounds of 1 s samples, between the default pods.
func hostVethSpec(t *testing.T, test engine.Test, repeat int) Spec {
	t.Helper()
	pods, err := lab.DefaultPodSpecs(lab.DefaultPods, lab.DefaultPodCIDR, 1)
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Modes:     []ModeVariant{{Label: "host", Mode: "host"}, {Label: "veth-routed", Mode: "veth-routed"}},
		Paths:     []string{"pod"},
		Tests:     []engine.Test{test},
		Duration:  time.Second,
		Repeat:    repeat,
		Settings:  knob.Settings{Streams: 1, Size: 1, Rate: knob.Unlimited},
		Pods:      pods,
		PodCIDR:   lab.DefaultPodCIDR,
		LabPrefix: testLabPrefix,
	}
}

// runSpec runs spec within 3 minutes; an error ends the test.
func runSpec(t *testing.T, spec Spec) *results.File {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, err := Run(ctx, spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A real run over two labs: statistics, CPU blocks, the baseline comparison,
// and a failed sample that is kept, marked, and not counted.
func TestRunHostVethWithFailedSamples(t *testing.T) {
	requireLabs(t, testLabPrefix)
	real, err := engine.Get("iperf3")
	if err != nil {
		t.Fatal(err)
	}
	engine.Register(&flaky{real: real})
	spec := hostVethSpec(t, engine.TCPStream, 3)
	spec.Engine = "st-flaky"
	spec.Order = OrderFixed // flaky fails by call count: A B A B A B
	f := runSpec(t, spec)
	if len(f.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(f.Cells))
	}
	for _, c := range f.Cells {
		if c.Valid != 2 || c.Failed != 1 || len(c.Samples) != 3 {
			t.Fatalf("%s: valid=%d failed=%d samples=%d, want 2/1/3", c.Mode, c.Valid, c.Failed, len(c.Samples))
		}
		var good []float64
		for _, s := range c.Samples {
			if s.Valid {
				good = append(good, s.Value)
				if s.CPU == nil || s.CPU.Window != "client" {
					t.Errorf("%s: valid sample without a client CPU window: %+v", c.Mode, s.CPU)
				}
			} else if s.Error == "" {
				t.Errorf("%s: failed sample without its error", c.Mode)
			}
		}
		// The failed sample (value 0) must not pull the median down.
		if want := (good[0] + good[1]) / 2; c.Median != want || c.Min == 0 {
			t.Errorf("%s: median %g min %g, want median %g of the valid samples only", c.Mode, c.Median, c.Min, want)
		}
		if len(c.CI95) != 2 || c.CI95[0] > c.Median || c.CI95[1] < c.Median {
			t.Errorf("%s: ci95 %v does not bracket the median %g", c.Mode, c.CI95, c.Median)
		}
		if c.CPU == nil || c.CPU.SystemSec+c.CPU.SoftirqSec <= 0 || c.CPU.PerGB <= 0 || c.CPU.Samples != 2 {
			t.Errorf("%s: cpu block %+v, want positive system+softirq and s/GB over 2 samples", c.Mode, c.CPU)
		}
		if c.VsBaseline == nil || c.VsBaseline.Baseline != "host" {
			t.Fatalf("%s: no comparison with host: %+v", c.Mode, c.VsBaseline)
		}
	}
	if v := f.Cells[0].VsBaseline.Verdict; v != "baseline" {
		t.Errorf("host verdict %q, want baseline", v)
	}
	// 2 vs 2 samples: the smallest possible Mann-Whitney p is 2/6, so "~".
	if v := f.Cells[1].VsBaseline; v.Verdict != "~" || v.MinPValue < 0.3 {
		t.Errorf("veth-routed with 2 vs 2 samples: %+v, want ~", v)
	}

	// The JSON keeps the failed sample, marked; the table shows it.
	path := filepath.Join(t.TempDir(), "r.json")
	if err := results.Write(path, f); err != nil {
		t.Fatal(err)
	}
	back, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	failed := back.Cells[1].Samples[1]
	if failed.Valid || !strings.Contains(failed.Error, "deliberate") {
		t.Errorf("JSON sample 2 of veth-routed: valid=%v error=%q, want failed", failed.Valid, failed.Error)
	}
	var buf bytes.Buffer
	report.Table(&buf, back, false)
	out := buf.String()
	for _, want := range []string{"2 (1 failed)", "FAILED veth-routed/pod/tcp_stream sample 2", "baseline", "s/GB", "cannot reach p < 0.05"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// Cells picks cells out of the matrix by name; "*" stays within one part.
func TestSpecWantsCells(t *testing.T) {
	all := Spec{}
	id := results.CellID{Mode: "veth-routed", Path: "service", Provider: "ebpf", ExtraServices: 10000, Test: "tcp_crr"}
	if !all.Wants(id) {
		t.Fatal("a spec without cells must want every cell")
	}
	s := Spec{Cells: []string{"veth-routed/service(ebpf+*)/tcp_crr", "host/pod/tcp_rr"}}
	for _, c := range []struct {
		id   results.CellID
		want bool
	}{
		{id, true},
		{results.CellID{Mode: "veth-routed", Path: "service", Provider: "ebpf", Test: "tcp_crr"}, false},
		{results.CellID{Mode: "veth-routed", Path: "service", Provider: "ebpf-sock", ExtraServices: 10000, Test: "tcp_crr"}, false},
		{results.CellID{Mode: "host", Path: "pod", Test: "tcp_rr"}, true},
		{results.CellID{Mode: "host", Path: "pod", Test: "tcp_stream"}, false},
	} {
		if got := s.Wants(c.id); got != c.want {
			t.Errorf("Wants(%s) = %v, want %v", c.id, got, c.want)
		}
	}
	if err := checkCells([]string{"veth-routed/[pod/tcp_rr"}); err == nil {
		t.Error("a malformed pattern was accepted")
	}
}

package report

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// go test ./internal/present/report -run Golden -update rewrites the golden files.
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func loadFixture(t *testing.T) *results.File {
	t.Helper()
	f, err := results.Read("testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/present/report -run Golden -update to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs from the golden file at line %d:\n got: %q\nwant: %q\n(if the change is intended: go test ./internal/present/report -run Golden -update)", name, i+1, g, w)
		}
	}
}

func TestGoldenMarkdown(t *testing.T) {
	var b bytes.Buffer
	Markdown(&b, Build(loadFixture(t)))
	golden(t, "report.md.golden", b.Bytes())
}

func TestGoldenHTML(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, Build(loadFixture(t))); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.html.golden", b.Bytes())
}

// The report says what it must: ceilings, seed verdicts, failures, skips.
func TestReportContent(t *testing.T) {
	var b bytes.Buffer
	Markdown(&b, Build(loadFixture(t)))
	md := b.String()
	for _, want := range []string{
		"Ceiling = host/pod/tcp_stream (loopback in one namespace): 22.8 Gbit/s",
		"| veth-routed | pod | 16.1 | [15.8, 16.3] |",
		"0.70 [0.69, 0.72]", // veth-routed / host with the CI of the ratio
		"| macvlan | service(iptables) | FAILED |",
		// Predicted by the run (its note), so a result: said so, with the prediction.
		"| bridge-nf-off | service(iptables) | failed as expected |  |  | 0 (5 failed) |  |  | expected to fail: bridge_nf_call_iptables=off",
		"**ipvlan**: kernel has no ipvlan support (CONFIG_IPVLAN)",
		"| veth, clusterIP | 66.0 | 1.00 | veth-routed/service(iptables)/tcp_stream | 15.8 Gbit/s | 0.98 [0.92, 1.00] | agrees |",
		"disagrees (ours 1.01 vs seed 1.17)", // bridge nf-off: the seed's +17% is not here
		"disagrees (ours 0.83 vs seed 0.88)", // seed 001
		"| ipvlan, podIP | 83.0 | 1.26 | ipvlan/pod/tcp_stream |  |  | skipped: kernel has no ipvlan support (CONFIG_IPVLAN) |",
		"CPU-seconds per 1k transactions",
		"`vnetlab run -f scenarios/seed-002-pod-modes.yaml --repeat 5 --report 'out dir'`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	// Seed 003 has only its baseline (bridge) in this run: nothing to compare, no table.
	if strings.Contains(md, "Seed 003") {
		t.Error("seed 003's table is shown although only its baseline cell is in the run")
	}
}

func TestNoCeiling(t *testing.T) {
	f := loadFixture(t)
	var cells []*results.Cell
	for _, c := range f.Cells {
		if c.Mode != "host" {
			cells = append(cells, c)
		}
	}
	f.Cells = cells
	var b bytes.Buffer
	Markdown(&b, Build(f))
	if !strings.Contains(b.String(), "This run has no host cell (loopback in one namespace) for tcp_stream: no ratio to the ceiling") {
		t.Error("a run without a host cell must say it has no ceiling")
	}
	if strings.Contains(b.String(), "× ceiling") {
		t.Error("ratio-to-ceiling column shown without a ceiling")
	}
}

func cellWith(mode string, vals ...float64) *results.Cell {
	c := &results.Cell{Mode: mode, Path: "pod", Test: "tcp_stream", Unit: "Gbit/s"}
	for _, v := range vals {
		c.Samples = append(c.Samples, results.Sample{Valid: true})
		c.Samples[len(c.Samples)-1].Value = v
	}
	c.Median, c.Valid = stats.Median(vals), len(vals)
	return c
}

func TestSeedVerdict(t *testing.T) {
	base := cellWith("veth-routed", 10, 10.1, 9.9, 10.05, 9.95)
	same := cellWith("bridge", 11.6, 11.8, 11.7, 11.75, 11.65) // ratio 1.17
	if _, v, _ := seedVerdict(same, base, 77.0/66); v != "agrees" {
		t.Errorf("ratio 1.17 vs seed 1.17: got %q, want agrees", v)
	}
	if _, v, _ := seedVerdict(base, base, 77.0/66); v != "disagrees (ours 1.00 vs seed 1.17)" {
		t.Errorf("ratio 1.00 vs seed 1.17: got %q", v)
	}
	// A CI that holds both 1.00 and the seed's ratio agrees only weakly.
	wide := cellWith("bridge", 6, 14, 10, 11.7, 8)
	if _, v, _ := seedVerdict(wide, base, 77.0/66); v != "agrees, weakly: our CI also holds 1.00 (no difference)" {
		t.Errorf("wide CI: got %q", v)
	}
	if _, v, _ := seedVerdict(wide, base, 1.0); v != "agrees, weakly: our CI is too wide to tell" {
		t.Errorf("wide CI, seed 1.00: got %q", v)
	}
	// One sample a side: no CI, so ±5% decides.
	one, b1 := cellWith("macvlan", 10.3), cellWith("veth-routed", 10)
	if ours, v, _ := seedVerdict(one, b1, 1.0); v != "agrees" || !strings.Contains(ours, "no CI") {
		t.Errorf("1.03 vs 1.00 without CI: got %q %q, want agrees within 5%%", ours, v)
	}
	if _, v, _ := seedVerdict(one, b1, 1.26); v != "disagrees (ours 1.03 vs seed 1.26)" {
		t.Errorf("1.03 vs 1.26 without CI: got %q", v)
	}
}

// A seed row with a stand-in mode matches it and says so.
func TestSeedStandIn(t *testing.T) {
	base := cellWith("veth-routed", 10, 10.1, 9.9)
	mv := cellWith("macvlan-ebpf", 12.5, 12.6, 12.4)
	views, _ := compareSeeds([]*results.Cell{base, mv})
	var found bool
	for _, v := range views {
		for _, r := range v.Rows {
			if r.What == "ipvlan+eBPF, podIP" {
				found = true
				if !strings.Contains(r.Ours, "stands in for ipvlan-ebpf") || r.Class == "none" {
					t.Errorf("stand-in row: %+v", r)
				}
			}
		}
	}
	if !found {
		t.Error("seed 002's ipvlan+eBPF row is missing")
	}
}

func TestChartHasBarsAndErrorBars(t *testing.T) {
	d := Build(loadFixture(t))
	ch := d.Tests[0].Chart
	svg := ch.SVG(true)
	// 7 valid tcp_stream cells: 7 bars, each with a CI whisker of 3 lines.
	if n := strings.Count(svg, `class="bar"`); n != 7 {
		t.Errorf("%d bars, want 7", n)
	}
	if n := strings.Count(svg, `class="ci"`); n != 21 {
		t.Errorf("%d CI lines, want 21", n)
	}
	if !strings.Contains(svg, "service(iptables): FAILED (no valid sample)") {
		t.Error("the failed cell is not labelled in the chart")
	}
	if !strings.Contains(svg, `fill="#666666" font-weight="bold">service(iptables): failed as expected (no valid sample)`) {
		t.Error("the predicted failure is not labelled, in grey, in the chart")
	}
	b, err := ch.PNG()
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if n := countColor(img, palette[0], 8); n < 5000 {
		t.Errorf("PNG has %d pixels of the bar colour, want a chart", n)
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	files, err := Write(dir, loadFixture(t), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"report.md", "report.html", "chart-tcp_stream.svg", "chart-tcp_stream.png", "chart-tcp_rr.svg", "chart-tcp_rr.png",
		"cpu-tcp_stream.svg", "cpu-tcp_stream.png", "cpu-tcp_rr.svg", "cpu-tcp_rr.png"}
	if len(files) != len(want) {
		t.Errorf("wrote %v, want %v", files, want)
	}
	for _, w := range want {
		if st, err := os.Stat(filepath.Join(dir, w)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", w, err)
		}
	}
	if _, err := Write(filepath.Join(dir, "empty"), &results.File{SchemaVersion: 1}, ""); err == nil {
		t.Error("an empty results file gave a report")
	}
	if _, err := os.Stat(filepath.Join(dir, "empty")); err == nil {
		t.Error("a refused report left a directory behind")
	}
}

// The report says where each test's engines ran, and warns about
// request/response cells measured unpinned on a machine with few CPUs only.
func TestCPUAffinityShownAndWarned(t *testing.T) {
	f := loadFixture(t)
	f.Metadata.Settings.CPUAffinity = "auto"
	for _, c := range f.Cells {
		if c.Test == "tcp_rr" {
			c.CPUAffinity = &results.CPUAffinity{Client: 1, Server: 1}
		}
	}
	d := Build(f)
	row := ""
	for _, kv := range d.Meta {
		if kv.Key == "CPU affinity" {
			row = kv.Value
		}
	}
	if row != "auto: tcp_stream unpinned; tcp_rr client CPU 1, server CPU 1" {
		t.Errorf("CPU affinity row %q", row)
	}
	for _, w := range d.Warnings {
		if strings.Contains(w, "unpinned") {
			t.Errorf("pinned tcp_rr warned: %s", w)
		}
	}
	unpinned := loadFixture(t)
	for cpus, want := range map[int]bool{2: true, 4: true, 16: false} {
		unpinned.Metadata.CPUs = cpus
		got := false
		for _, w := range Build(unpinned).Warnings {
			got = got || strings.Contains(w, "tcp_rr ran unpinned on")
		}
		if got != want {
			t.Errorf("unpinned tcp_rr on %d CPUs: warned %v, want %v", cpus, got, want)
		}
	}
}

package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

func convRun(proxy string, n int, p99ms float64, rates ...float64) ConvergeRun {
	r := results.ConvergeRow{Kind: "endpoint-added", Node: "all nodes", Changes: 10, P50: results.QuantileCI{Value: p99ms * 500},
		P99: results.QuantileCI{Value: p99ms * 1000, CI: [2]float64{p99ms * 900, p99ms * 1100}}}
	c := &results.Convergence{Proxy: proxy, Rows: []results.ConvergeRow{r}, Scale: &results.Scale{Services: n, Endpoints: 1,
		Use: []results.DaemonUse{{Daemon: "n1 proxy", Phase: results.PhaseIdle, RSS: 50 << 20}, {Daemon: "etcd", Phase: results.PhaseIdle, RSS: 100 << 20}}}}
	if len(rates) > 0 {
		c.CRR = &results.NewestCRR{Rates: rates}
	}
	return ConvergeRun{File: proxy, C: c}
}

// The table orders runs by proxy and N, gives tcp_crr as a ratio to the
// same proxy's N = 0 (also at E = 10), the proxies' RSS apart from etcd's; the chart puts
// N on a log axis (0 a decade left of the smallest) with a line per proxy.
func TestConvergeTableAndChart(t *testing.T) {
	runs := []ConvergeRun{
		convRun("iptables", 10000, 900, 500, 510, 490),
		convRun("vnetlab-ebpf", 0, 2, 1000, 1010, 990),
		convRun("iptables", 0, 600, 1000, 1000, 1000),
		convRun("vnetlab-ebpf", 10000, 3, 950, 960, 940),
		convRun("vnetlab-ebpf", 1000, 2.5),
	}
	e10 := convRun("vnetlab-ebpf", 30000, 4, 900, 910, 890)
	e10.C.Scale.Endpoints = 10 // its base: N = 0, whatever E
	var b bytes.Buffer
	PrintConvergeTable(&b, append(slices.Clone(runs), e10), []string{"endpoint-added"})
	out := b.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 {
		t.Fatalf("%d lines, want a header and 6 rows:\n%s", len(lines), out)
	}
	if !strings.Contains(lines[6], "vnetlab-ebpf  10 ") || !strings.Contains(lines[6], "0.900 [") {
		t.Errorf("E = 10 at 30,000 without its ratio to N = 0: %q", lines[6])
	}
	for i, want := range []string{"iptables  1  50ms-250ms  0 ", "iptables  1  50ms-250ms  10000", "vnetlab-ebpf  1  50ms-250ms  0 ", "vnetlab-ebpf  1  50ms-250ms  1000 ", "vnetlab-ebpf  1  50ms-250ms  10000"} {
		if !strings.Contains(strings.Join(strings.Fields(lines[i+1]), "  ")+" ", want) {
			t.Errorf("row %d: %q, want %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[2], "0.500 [") || !strings.Contains(lines[5], "0.950 [") || !strings.Contains(lines[1], "1.000") {
		t.Errorf("tcp_crr ratios to N=0 missing:\n%s", out)
	}
	if !strings.Contains(lines[1], " 50 ") || !strings.Contains(lines[1], " 100 ") {
		t.Errorf("proxy RSS 50 MB and API+etcd 100 MB missing: %q", lines[1])
	}
	ch := ConvergeChart(runs, "endpoint-added")
	if len(ch.Lines) != 2 || strings.Join(ch.X, ",") != "0,1000,10000" {
		t.Fatalf("chart lines %d, X %v", len(ch.Lines), ch.X)
	}
	if ch.XAt[0] != 0 || ch.XAt[1] != 0.5 || ch.XAt[2] != 1 {
		t.Errorf("log positions %v: want 0 (N=0, a decade below 1000), 0.5, 1", ch.XAt)
	}
	if ch.Lines[0].Label != "vnetlab-ebpf, E=1" || !ch.Lines[0].Own || ch.Lines[1].Own {
		t.Errorf("lines %q (own %v, %v): want vnetlab's own proxy first, marked", []string{ch.Lines[0].Label, ch.Lines[1].Label}, ch.Lines[0].Own, ch.Lines[1].Own)
	}
	if ch.Lines[0].Points[2].Value != 3 || !ch.Lines[1].Points[1].Missing {
		t.Errorf("points: %+v", ch.Lines)
	}
	if svg := ch.SVG(true); !strings.Contains(svg, "<svg") || !strings.Contains(svg, "vnetlab-ebpf, E=1") {
		t.Error("the chart's SVG lacks its lines")
	}
}

// Runs of one proxy with another pause are a line of their own, in the
// table and the chart (kube-proxy's rate limit sets its latency under a
// short pause, not under a long one), and take their tcp_crr ratio from
// the proxy's N = 0 at any pause.
func TestConvergeTablePause(t *testing.T) {
	alone := func(n int, p99ms float64, rates ...float64) ConvergeRun {
		r := convRun("nftables", n, p99ms, rates...)
		r.C.Pause = "1.5s-2s"
		return r
	}
	runs := []ConvergeRun{alone(10000, 300, 500, 500, 500), convRun("nftables", 10000, 1100), convRun("nftables", 0, 900, 1000, 1000, 1000), alone(0, 20)}
	var b bytes.Buffer
	PrintConvergeTable(&b, runs, []string{"endpoint-added"})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want a header and 4 rows:\n%s", len(lines), b.String())
	}
	for i, want := range []string{"nftables  1  1.5s-2s  0 ", "nftables  1  1.5s-2s  10000 ", "nftables  1  50ms-250ms  0 ", "nftables  1  50ms-250ms  10000 "} {
		if !strings.HasPrefix(strings.Join(strings.Fields(lines[i+1]), "  ")+" ", want) {
			t.Errorf("row %d: %q, want %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[2], "0.500 [") {
		t.Errorf("the paused run at 10,000 lacks its tcp_crr ratio to the N = 0 run of another pause: %q", lines[2])
	}
	ch := ConvergeChart(runs, "endpoint-added")
	if len(ch.Lines) != 2 || ch.Lines[0].Label != "nftables, E=1, pause 1.5s-2s" || ch.Lines[1].Label != "nftables, E=1" {
		t.Fatalf("chart lines %+v, want one per pause, the default's unnamed", ch.Lines)
	}
	if ch.Lines[0].Points[1].Value != 300 || ch.Lines[1].Points[1].Value != 1100 {
		t.Errorf("points at 10,000: %v and %v, want 300 and 1100", ch.Lines[0].Points[1].Value, ch.Lines[1].Points[1].Value)
	}
}

// A change a node did not apply is named with its object and node, never
// a latency; the first line says the probers' flows' conntrack timeout and
// the pause between changes; a line splits each node's changes by the time
// since it showed the one before.
func TestPrintConvergenceNamesNotApplied(t *testing.T) {
	c := &results.Convergence{Proxy: "unknown proxy", Changes: []results.Change{
		{Seq: 0, Kind: "service-created", Target: "10.96.0.1:53", LatencyUS: map[string]int64{"n1": 900, "n2": 1200}},
		{Seq: 1, Kind: "endpoint-added", Target: "10.96.0.1:53", LatencyUS: map[string]int64{"n1": 800}, NotApplied: []string{"n2"}},
	}}
	var b bytes.Buffer
	PrintConvergence(&b, c)
	if want := "not applied: change 1 (endpoint-added of the Service at 10.96.0.1:53) on n2"; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
	if !strings.Contains(b.String(), "proxy unknown proxy") {
		t.Errorf("the unknown proxy is not said:\n%s", b.String())
	}
	// The probers' flows' conntrack timeout: the kernel's unless recorded.
	if !strings.Contains(b.String(), "their flows' conntrack timeout the kernel's") {
		t.Errorf("a file without the probers' flows' timeout does not say the kernel's:\n%s", b.String())
	}
	// A node's changes by the time since it showed the previous one: n1's
	// change 1 was written within 1 s of it showing change 0 (n2 did not
	// show change 1).
	if want := "under 1s / 1s or more (kube-proxy syncs at most once per minSyncPeriod, 1 s by default: it holds the first): n1 0.8 (1) / - (0)"; !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
	// The pause between changes: 50-250 ms in a file from before --pause.
	if !strings.Contains(b.String(), "each 50ms-250ms after the last was shown") {
		t.Errorf("a file without the pause does not say the one it had:\n%s", b.String())
	}
	c.ProbeConntrackTimeoutS, c.Pause = 1, "1.5s-2s"
	b.Reset()
	PrintConvergence(&b, c)
	if !strings.Contains(b.String(), "their flows' conntrack timeout 1 s") || !strings.Contains(b.String(), "each 1.5s-2s after the last was shown") {
		t.Errorf("the probers' flows' 1 s timeout or the pause of 1.5-2 s is not said:\n%s", b.String())
	}
	// Columns no row has are left out; a row with a metric and kept
	// connections brings theirs.
	c.Rows = []results.ConvergeRow{{Kind: "service-created", Node: "n1", Changes: 1}}
	b.Reset()
	PrintConvergence(&b, c)
	if strings.Contains(b.String(), "METRIC") || strings.Contains(b.String(), "CONNS") {
		t.Errorf("empty metric and connection columns shown:\n%s", b.String())
	}
	c.Rows[0].Metrics, c.Rows[0].MetricEarly, c.Rows[0].ConnsHeld, c.Rows[0].ConnsBroken = 4, 1, 10, 2
	b.Reset()
	PrintConvergence(&b, c)
	if !strings.Contains(b.String(), "METRIC EARLY") || !strings.Contains(b.String(), "1 of 4") || !strings.Contains(b.String(), "2 of 10") {
		t.Errorf("metric and connection columns missing:\n%s", b.String())
	}
}

// A policy's apply latency (kube converge --policy) is a line of its
// enforcer on its CNI mode, N the other policies, apart from the Service
// runs; its table's title names the enforcer.
func TestConvergeTablePolicies(t *testing.T) {
	pol := func(n int) ConvergeRun {
		r := results.ConvergeRow{Kind: "allow-added", Node: "all nodes", Changes: 200, P50: results.QuantileCI{Value: 9000}, P99: results.QuantileCI{Value: 35000}}
		return ConvergeRun{File: "p", C: &results.Convergence{Proxy: "vnetlab-ebpf", PolicyProvider: "vnetlab", Policies: n,
			Cluster: &results.Cluster{CNIMode: "veth-ebpf"}, Rows: []results.ConvergeRow{r}}}
	}
	var b bytes.Buffer
	PrintConvergeTable(&b, []ConvergeRun{pol(1000), convRun("vnetlab-ebpf", 0, 2), pol(0)}, []string{"endpoint-added", "allow-added"})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[3], "vnetlab-ebpf ") {
		t.Fatalf("want the policy runs by N, then the Service run:\n%s", b.String())
	}
	for i, want := range []string{"policy  vnetlab  on  veth-ebpf  0  50ms-250ms  0  allow-added", "policy  vnetlab  on  veth-ebpf  0  50ms-250ms  1000  allow-added"} {
		if got := strings.Join(strings.Fields(lines[i+1]), "  "); !strings.HasPrefix(got, want) {
			t.Errorf("row %d: %q, want %q", i+1, lines[i+1], want)
		}
	}
	b.Reset()
	PrintConvergence(&b, pol(1000).C)
	if want := "policy apply latency, NetworkPolicy enforcer vnetlab (proxy vnetlab-ebpf), 1000 other policies present"; !strings.Contains(b.String(), want) {
		t.Errorf("title:\n%s\nwant %q", b.String(), want)
	}
}

// The write calls' p50 (the API server's share of a latency), and the
// latency after the write's answer, are columns of both tables when a file
// timed them, "-" for a file from before; a single run's table has the
// columns only then.
func TestConvergeWriteShare(t *testing.T) {
	timed, old := convRun("vnetlab-ebpf", 0, 12), convRun("iptables", 0, 900)
	timed.C.Rows[0].Write = &results.QuantileCI{Value: 4200, CI: [2]float64{4000, 4400}}
	timed.C.Changes = []results.Change{ // 2 and 5 ms after their writes' answers
		{Kind: "endpoint-added", WriteUS: 4000, LatencyUS: map[string]int64{"n1": 6000}},
		{Kind: "endpoint-added", WriteUS: 4000, LatencyUS: map[string]int64{"n1": 9000}},
	}
	var b bytes.Buffer
	PrintConvergeTable(&b, []ConvergeRun{timed, old}, []string{"endpoint-added"})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "WRITE P50 MS") || !strings.Contains(lines[2], "4.2 [4.0, 4.4]") {
		t.Fatalf("the scale table lacks the timed run's write p50:\n%s", b.String())
	}
	if !strings.Contains(lines[0], "AFTER WRITE P50 / P99 MS") || !strings.Contains(lines[2], "2.0 / 5.0 [") {
		t.Errorf("the scale table lacks the timed run's latency after the write:\n%s", b.String())
	}
	if f := strings.Fields(lines[1]); !strings.Contains(lines[1], "900.0") || f[12] != "-" || f[13] != "-" {
		t.Errorf("the untimed run's write p50 and latency after it are not \"-\": %q", lines[1])
	}
	b.Reset()
	PrintConvergence(&b, timed.C)
	if !strings.Contains(b.String(), "WRITE P50 MS") || !strings.Contains(b.String(), "4.2 [4.0, 4.4]") || !strings.Contains(b.String(), "2.0 / 5.0 [") {
		t.Errorf("the run's table lacks the write p50 or the latency after it:\n%s", b.String())
	}
	b.Reset()
	PrintConvergence(&b, old.C)
	if strings.Contains(b.String(), "WRITE") {
		t.Errorf("a file without write times has the column:\n%s", b.String())
	}
}

// The EndpointSlice controller's share is a line of a run's table and a
// table of its own under the scale table, only for runs that measured it.
func TestConvergeControllerShare(t *testing.T) {
	with, without := convRun("vnetlab-ebpf", 1000, 12), convRun("iptables", 0, 900)
	with.C.Controller = &results.ControllerShare{Changes: 40, NotApplied: 1, P50: results.QuantileCI{Value: 21500}, P99: results.QuantileCI{Value: 60000}, MaxUS: 61000}
	var b bytes.Buffer
	PrintConvergeTable(&b, []ConvergeRun{with, without}, []string{"endpoint-added"})
	out := b.String()
	i := strings.Index(out, "controller's share")
	if i < 0 || !strings.Contains(out[i:], "vnetlab-ebpf  1  50ms-250ms  1000  40       1         21.5    60.0") || strings.Contains(out[i:], "iptables") {
		t.Errorf("the controller's share table lacks the run that measured it, or has the other:\n%s", out)
	}
	b.Reset()
	PrintConvergence(&b, with.C)
	if !strings.Contains(b.String(), "40 changes): p50 21.5 ms, p99 60.0 ms, max 61.0 ms; 1 not seen") {
		t.Errorf("the run's table lacks the controller's share:\n%s", b.String())
	}
	b.Reset()
	PrintConvergeTable(&b, []ConvergeRun{without}, []string{"endpoint-added"})
	if strings.Contains(b.String(), "controller") {
		t.Errorf("a table without the share says it:\n%s", b.String())
	}
}

// The memory column is the proxy's maps and all the planes' maps; a file
// from before the parts shows the sum alone. The run's text says each part.
func TestConvergeMapParts(t *testing.T) {
	parted := convRun("vnetlab-ebpf", 0, 2)
	parted.C.Scale.BPFMapBytes = 400 << 20
	parted.C.Scale.BPFMapParts = map[string]int64{results.MapPartProxy: 300 << 20, results.MapPartRouting: 30 << 20, results.MapPartPolicy: 70 << 20}
	old := convRun("vnetlab-ebpf", 1000, 2)
	old.C.Scale.BPFMapBytes = 410 << 20
	var b bytes.Buffer
	PrintConvergeTable(&b, []ConvergeRun{parted, old}, []string{"endpoint-added"})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "BPF MAPS MB (PROXY / ALL)") || !strings.Contains(lines[1], " 300.0 / 400.0 ") || !strings.Contains(lines[2], " - / 410.0 ") {
		t.Errorf("want the proxy's and all maps, and - for a file without parts:\n%s", b.String())
	}
	b.Reset()
	PrintConvergence(&b, parted.C)
	if !strings.Contains(b.String(), "eBPF maps of the nodes' planes 400.0 MB: proxy 300.0, host-routing 30.0, policy 70.0\n") {
		t.Errorf("the run's text misses the parts:\n%s", b.String())
	}
}

// The machine's other work is a column of the scale table, with the changes
// it disturbed ("-" for a file without it), and lines of a run's report:
// the phases, the busiest sample, the names, and a warning naming the
// disturbed changes as ranges.
func TestConvergeOtherWork(t *testing.T) {
	const s = int64(1e9)
	busy, old := convRun("vnetlab-ebpf", 0, 12), convRun("iptables", 0, 900)
	for i := range 5 {
		busy.C.Changes = append(busy.C.Changes, results.Change{Seq: i + 1, Kind: "endpoint-added", Written: int64(i) * 5 * s, LatencyUS: map[string]int64{"n1": 1000}})
	}
	busy.C.OtherWork = &results.OtherWork{
		Phases: map[string]float64{results.PhaseCreate: 0.4, results.PhaseIdle: 0, results.PhaseChanges: 15.2},
		Samples: []results.OtherWorkSample{
			{Start: 0, End: 10 * s, CPUSeconds: 0.1},
			{Start: 10 * s, End: 20 * s, CPUSeconds: 15},
			{Start: 20 * s, End: 30 * s, CPUSeconds: 0.1},
		},
		Top:         []results.NamedCPU{{Name: "compile", CPUSeconds: 9.5}, {Name: "go", CPUSeconds: 2}},
		ReadSeconds: 0.05,
	}
	var b bytes.Buffer
	PrintConvergeTable(&b, []ConvergeRun{busy, old}, []string{"endpoint-added"})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "OTHER WORK CPU S") || !strings.HasSuffix(lines[2], "15.2 (2 DISTURBED)") || !strings.HasSuffix(lines[1], " -") {
		t.Errorf("the scale table's other work:\n%s", b.String())
	}
	b.Reset()
	PrintConvergence(&b, busy.C)
	for _, want := range []string{
		"15.2 CPU s during the changes (50.67% of a CPU; its busiest 10 s: 1.50 CPUs), 0.4 in the create phase, 0.0 in the idle phase; by name: compile 9.5 s, go 2.0 s; its readings took 0.05 s",
		"warning: 2 of 5 changes overlapped other work above 0.1 CPUs (changes 3-4)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("a run's report lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	PrintConvergence(&b, old.C)
	if strings.Contains(b.String(), "other work") {
		t.Errorf("a file without the other work has it:\n%s", b.String())
	}
}

// A run on Services kept from before, on a proxy kube set-proxy started
// (the cluster's proxy_since), shows "-" for the proxy's CPU while N was
// made: its first sync made them during the switch. A run that made its N
// itself shows it, switched or not.
func TestConvergeSwitchedProxyCPU(t *testing.T) {
	use := []results.DaemonUse{{Daemon: "n1 proxy", Phase: results.PhaseCreate, CPUSeconds: 4}, {Daemon: "n1 proxy", Phase: results.PhaseChanges, CPUSeconds: 2},
		{Daemon: "n1 proxy", Phase: results.PhaseIdle, RSS: 50 << 20}}
	kept := convRun("nftables", 1000, 2)
	kept.C.Cluster = &results.Cluster{ProxySince: "2026-11-29T10:00:00Z"}
	kept.C.Scale.Reused, kept.C.Scale.Use = 1000, use
	made := convRun("vnetlab-ebpf", 1000, 2)
	made.C.Cluster = &results.Cluster{ProxySince: "2026-11-29T10:00:00Z"}
	made.C.Scale.Use = use
	grew := convRun("iptables", 1000, 2) // switched in at 500, it made the other 500
	grew.C.Cluster = &results.Cluster{ProxySince: "2026-11-29T10:00:00Z"}
	grew.C.Scale.Reused, grew.C.Scale.Use = 500, use
	var b bytes.Buffer
	PrintConvergeTable(&b, []ConvergeRun{kept, made, grew}, []string{"endpoint-added"})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], " 4.0 / 2.0 ") || !strings.Contains(lines[2], " - / 2.0 ") || !strings.Contains(lines[3], " 4.0 / 2.0 ") {
		t.Errorf("want - for the making-N CPU of the run that reused all, 4.0 for the runs that made some:\n%s", b.String())
	}
}

// Runs that their proxy, E, pause and N would merge are told apart: a
// proxy on two CNI data paths by the path, a run measured again by its
// order.
func TestConvergeRunsQualified(t *testing.T) {
	on := func(proxy, mode string, start int, p99 float64) ConvergeRun {
		r := convRun(proxy, 1000, p99)
		r.C.Cluster = &results.Cluster{CNIMode: mode}
		r.C.Start = time.Date(2026, 11, 28, 12, start, 0, 0, time.UTC)
		return r
	}
	runs := []ConvergeRun{on("vnetlab-ebpf", "veth-ebpf", 30, 3), on("iptables", "veth-ebpf", 10, 20), on("iptables", "bridge", 1, 30), on("vnetlab-ebpf", "veth-ebpf", 5, 2)}
	var b bytes.Buffer
	PrintConvergeTable(&b, runs, []string{"endpoint-added"})
	var proxies []string // the table's first column: cells end at two spaces
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		proxies = append(proxies, strings.Split(line, "  ")[0])
	}
	if want := []string{"iptables (on bridge)", "iptables (on veth-ebpf)", "vnetlab-ebpf", "vnetlab-ebpf (run 2)"}; !slices.Equal(proxies, want) {
		t.Errorf("rows %q, want %q:\n%s", proxies, want, b.String())
	}
	ch := ConvergeChart(runs, "endpoint-added")
	var labels []string
	for _, l := range ch.Lines {
		labels = append(labels, l.Label)
		if l.Label == "vnetlab-ebpf (run 2), E=1" && l.Points[0].Value != 3 {
			t.Errorf("run 2 is the later run (p99 3 ms), got %v", l.Points[0].Value)
		}
	}
	if len(ch.Lines) != 4 {
		t.Errorf("want 4 lines, one per path and run, got %q", labels)
	}
}

package export

import (
	"bytes"
	"encoding/csv"
	"encoding/xml"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// cell makes a cell with one valid sample per value (bytes, transactions
// and CPU counters filled as a real run fills them) and n failed samples.
func cell(id results.CellID, unit string, failed int, values ...float64) *results.Cell {
	c := &results.Cell{Mode: id.Mode, Path: id.Path, Provider: id.Provider, ExtraServices: id.ExtraServices,
		Placement: id.Placement, Test: id.Test, Unit: unit}
	for i, v := range values {
		r := results.Result{Value: v}
		if unit == "Gbit/s" {
			r.Bytes = v * 1e9 / 8 * 2
		} else {
			r.Transfers = v * 2
			r.Latency = map[string]float64{"p50": 30 + float64(i), "p99": 48 + float64(i)}
		}
		s := results.Sample{Result: r, Valid: true,
			CPU: &results.SampleCPU{UserSec: 0.5, SystemSec: 1.1 + float64(i)/10, SoftirqSec: 0.3, WallSec: 2}}
		if id.Placement != "" { // a cluster cell: its nodes' CPU too
			s.NodeCPU = map[string]*results.SampleCPU{"k-1": {UserSec: 0.2, SystemSec: 0.6, SoftirqSec: 0.2, WallSec: 2}, "k-2": {UserSec: 0.1, SystemSec: 0.3, WallSec: 2}}
		}
		c.Samples = append(c.Samples, s)
	}
	for range failed {
		c.Samples = append(c.Samples, results.Sample{Error: "connect: no route to host"})
	}
	return c
}

// testFile is a run with every kind of cell: streams and rates, a service
// cell with generated Services, a placed (cluster) cell, one that failed
// unexpectedly, one that failed as predicted, one with a single sample.
func testFile() *results.File {
	f := &results.File{SchemaVersion: results.SchemaVersion, Metadata: results.Metadata{
		Vnetlab: "v1.2-3-gabc", Kernel: "6.18.0", CPUs: 2, Start: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}}
	nfOff := cell(results.CellID{Mode: "bridge-nf-off", Path: "service", Provider: "iptables", Test: "tcp_crr"}, "conn/s", 3)
	nfOff.Note = "expected to fail: bridge_nf_call_iptables=off"
	f.Cells = []*results.Cell{
		cell(results.CellID{Mode: "veth-routed", Path: "pod", Test: "tcp_stream"}, "Gbit/s", 0, 15.3, 16.1, 15.9, 16.8, 15.5),
		cell(results.CellID{Mode: "bridge", Path: "pod", Test: "tcp_stream"}, "Gbit/s", 1, 15.6, 16.3, 16.0, 15.8),
		cell(results.CellID{Mode: "bridge", Path: "service", Provider: "nftables", ExtraServices: 10000, Test: "tcp_crr"}, "conn/s", 0, 7900, 8100, 8050, 7990),
		cell(results.CellID{Mode: "k", Path: "pod", Placement: "cross-node", Test: "tcp_rr"}, "trans/s", 0, 41000.5, 39000.25, 40500),
		cell(results.CellID{Mode: "macvlan", Path: "pod", Test: "tcp_rr"}, "trans/s", 4),
		nfOff,
		cell(results.CellID{Mode: "host", Path: "pod", Test: "udp_stream"}, "Gbit/s", 0, 3.25),
	}
	analysis.Analyze(f.Cells, analysis.Options{})
	return f
}

// Every cell comes back from the CSV: its CellID from the coordinate
// columns, and each number exactly.
func TestCSVRoundTripsEveryCell(t *testing.T) {
	f := testFile()
	var b bytes.Buffer
	if err := Results(&b, CSV, f); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v", err)
	}
	head := rows[0]
	if strings.Join(head, ",") != strings.Join(CellsHeader(), ",") || len(rows) != len(f.Cells)+1 {
		t.Fatalf("header %v, %d rows for %d cells", head, len(rows)-1, len(f.Cells))
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for i, c := range f.Cells {
		row := rows[i+1]
		get := func(name string) string { return row[col[name]] }
		coords := map[string]string{}
		for _, n := range results.CoordinateNames() {
			coords[n] = get(n)
		}
		id, err := results.ParseCoordinates(coords)
		if err != nil || id != c.ID() {
			t.Errorf("row %d: cell %+v (%v), want %+v", i, id, err, c.ID())
		}
		number := func(name string, want float64, present bool) {
			s := get(name)
			if !present {
				if s != "" {
					t.Errorf("%s %s = %q, want empty", c.ID(), name, s)
				}
				return
			}
			got, err := strconv.ParseFloat(s, 64)
			if err != nil || got != want {
				t.Errorf("%s %s = %q, want %v", c.ID(), name, s, want)
			}
		}
		number("median", c.Median, c.Valid > 0)
		number("ci95_low", ci(c, 0), len(c.CI95) == 2)
		number("ci95_high", ci(c, 1), len(c.CI95) == 2)
		number("cv", c.CV, c.Valid >= 2)
		number("cpu_busy_s", busy(c), c.CPU != nil)
		number("cpu_s_per_gb", perGB(c), c.CPU != nil && c.Unit == "Gbit/s")
		number("cpu_s_per_1k_trans", perK(c), c.CPU != nil && c.Unit != "Gbit/s")
		if get("status") != c.Status || get("unit") != c.Unit || get("valid_samples") != strconv.Itoa(c.Valid) ||
			get("failed_samples") != strconv.Itoa(c.Failed) || get("run_start") != "2026-11-23T10:00:00Z" || get("cpus") != "2" {
			t.Errorf("%s: row %v", c.ID(), row)
		}
	}
}

func ci(c *results.Cell, i int) float64 {
	if len(c.CI95) == 2 {
		return c.CI95[i]
	}
	return 0
}

func busy(c *results.Cell) float64 {
	if c.CPU == nil {
		return 0
	}
	return c.CPU.BusySec
}

func perGB(c *results.Cell) float64 {
	if c.CPU == nil {
		return 0
	}
	return c.CPU.PerGB
}

func perK(c *results.Cell) float64 {
	if c.CPU == nil {
		return 0
	}
	return c.CPU.PerKTrans
}

// The OpenMetrics text passes promtool's checks (promlint is what `promtool
// check metrics` runs) and the Prometheus text parser reads back each
// cell's median, in base units, under its coordinates.
func TestOpenMetricsPassesPromtoolChecks(t *testing.T) {
	f := testFile()
	var b bytes.Buffer
	if err := Results(&b, OpenMetrics, f); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	if !strings.HasSuffix(text, "# EOF\n") {
		t.Errorf("no closing # EOF line:\n%s", text)
	}
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatalf("promlint cannot read the exposition: %v\n%s", err, text)
	}
	for _, p := range problems {
		t.Errorf("promtool check metrics: %s: %s", p.Metric, p.Text)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the text parser refuses it: %v", err)
	}
	find := func(family string, id results.CellID) (float64, bool) {
		mf, ok := mfs[family]
		if !ok {
			return 0, false
		}
	metrics:
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			for _, co := range id.Coordinates() {
				if labels[co.Name] != co.Value {
					continue metrics
				}
			}
			return m.GetGauge().GetValue(), true
		}
		return 0, false
	}
	// The cluster cell's node k-1: 1 s busy per sample over 2x41000 transactions, 60% of it system.
	k := results.CellID{Mode: "k", Path: "pod", Placement: "cross-node", Test: "tcp_rr"}
	perTrans := f.Cells[3].CPU.Nodes["k-1"].PerKTrans / 1000
	if got, ok := findNode(mfs, "vnetlab_cell_node_cpu_seconds_per_transaction", k, "k-1", "system"); !ok || math.Abs(got-0.6*perTrans) > 1e-12 {
		t.Errorf("node k-1's system CPU per transaction: %g (found %v), want %g", got, ok, 0.6*perTrans)
	}
	for _, c := range f.Cells {
		if c.Valid == 0 {
			if _, ok := find("vnetlab_throughput_bytes_per_second", c.ID()); ok {
				t.Errorf("%s has no valid sample but a median", c.ID())
			}
			continue
		}
		family, scale := map[string]string{"Gbit/s": "vnetlab_throughput_bytes_per_second", "trans/s": "vnetlab_transactions_per_second",
			"conn/s": "vnetlab_connections_per_second"}[c.Unit], map[string]float64{"Gbit/s": 1.25e8}[c.Unit]
		if scale == 0 {
			scale = 1
		}
		got, ok := find(family, c.ID())
		if !ok || !near(got, c.Median*scale) {
			t.Errorf("%s: %s = %v (found %v), want %v", c.ID(), family, got, ok, c.Median*scale)
		}
	}
	st := mfs["vnetlab_cell_status"]
	ones := 0
	for _, m := range st.GetMetric() {
		ones += int(m.GetGauge().GetValue())
	}
	if len(st.GetMetric()) != len(analysis.Statuses())*len(f.Cells) || ones != len(f.Cells) {
		t.Errorf("status: %d series, %d set, want %d and %d", len(st.GetMetric()), ones, len(analysis.Statuses())*len(f.Cells), len(f.Cells))
	}
}

func near(a, b float64) bool { return a == b || (a-b)/b < 1e-12 && (b-a)/b < 1e-12 }

type parsedSuites struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Suites   []struct {
		Name  string `xml:"name,attr"`
		Cases []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func parseJUnit(t *testing.T, b []byte) parsedSuites {
	t.Helper()
	var p parsedSuites
	if err := xml.Unmarshal(b, &p); err != nil {
		t.Fatalf("the JUnit XML does not parse: %v\n%s", err, b)
	}
	return p
}

// failedCases are the names of the failing test cases.
func failedCases(p parsedSuites) []string {
	var out []string
	for _, s := range p.Suites {
		for _, c := range s.Cases {
			if c.Failure != nil {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

// A run's JUnit: one case per cell, failing exactly for the cell run would
// exit 1 on (macvlan failed unpredicted); the predicted failure passes.
func TestJUnitOfARun(t *testing.T) {
	f := testFile()
	var b bytes.Buffer
	if err := Results(&b, JUnit, f); err != nil {
		t.Fatal(err)
	}
	p := parseJUnit(t, b.Bytes())
	if p.Tests != len(f.Cells) || len(p.Suites) != 1 || len(p.Suites[0].Cases) != len(f.Cells) {
		t.Errorf("%d tests in %d suites, want %d in 1", p.Tests, len(p.Suites), len(f.Cells))
	}
	if got := failedCases(p); p.Failures != 1 || len(got) != 1 || got[0] != "macvlan/pod/tcp_rr" {
		t.Errorf("failures %d %v, want only macvlan/pod/tcp_rr", p.Failures, got)
	}
}

// compare --fail-on-regression 5%: one failing case per regression
// (FileDiff.Regressions), none without the gate.
func TestJUnitOfCompare(t *testing.T) {
	old := testFile()
	new := testFile()
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range new.Cells {
		scale := 1.0
		switch c.Mode {
		case "veth-routed":
			scale = 0.8 // -20%: a regression
		case "bridge":
			scale = 0.97 // -3%: under the gate
		}
		for i := range c.Samples {
			c.Samples[i].Value *= scale * (1 + r.Float64()*1e-6)
		}
	}
	new.Cells[3].Samples = []results.Sample{{Error: "timeout"}} // lost cell: a regression whatever the gate
	analysis.Analyze(new.Cells, analysis.Options{})
	fd := analysis.Diff(old, new)
	var b bytes.Buffer
	if err := Verdicts(&b, JUnit, CompareVerdicts(fd, 5)); err != nil {
		t.Fatal(err)
	}
	p := parseJUnit(t, b.Bytes())
	want := []string{"veth-routed|pod||tcp_stream", "k|pod||tcp_rr|@cross-node"}
	if got := failedCases(p); strings.Join(got, " ") != strings.Join(want, " ") || p.Failures != len(fd.Regressions(5)) {
		t.Errorf("failing cases %v, want %v (regressions %d)", got, want, len(fd.Regressions(5)))
	}
	b.Reset()
	if err := Verdicts(&b, JUnit, CompareVerdicts(fd, -1)); err != nil {
		t.Fatal(err)
	}
	if p := parseJUnit(t, b.Bytes()); p.Failures != 0 {
		t.Errorf("without --fail-on-regression %d cases fail", p.Failures)
	}
	if err := Verdicts(&b, OpenMetrics, nil); err == nil {
		t.Error("compare exported OpenMetrics")
	}
}

// ratio --target: SHORT fails, MET passes, UNRESOLVED is skipped; the CSV
// row carries the ratio and its CI.
func TestRatioVerdicts(t *testing.T) {
	f := testFile()
	var vs []Verdict
	for _, target := range []string{">=0.9", ">=1.2", ">=1.0"} {
		tg, err := analysis.ParseTarget(target)
		if err != nil {
			t.Fatal(err)
		}
		r, err := analysis.RatioOf(f, "bridge/pod/tcp_stream", "veth-routed/pod/tcp_stream", analysis.MetricValue, &tg)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, RatioVerdict(r))
	}
	if vs[0].Outcome != Pass || vs[1].Outcome != Fail || vs[2].Outcome != Skip {
		t.Errorf("outcomes %v %v %v (%s; %s; %s), want pass fail skip", vs[0].Outcome, vs[1].Outcome, vs[2].Outcome, vs[0].Message, vs[1].Message, vs[2].Message)
	}
	var b bytes.Buffer
	if err := Verdicts(&b, JUnit, vs); err != nil {
		t.Fatal(err)
	}
	if p := parseJUnit(t, b.Bytes()); p.Failures != 1 || p.Tests != 3 {
		t.Errorf("%d tests, %d failures, want 3 and 1", p.Tests, p.Failures)
	}
	b.Reset()
	if err := Verdicts(&b, CSV, vs[:1]); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("verdict CSV: %v, %d rows", err, len(rows))
	}
	row := map[string]string{}
	for i, h := range rows[0] {
		row[h] = rows[1][i]
	}
	if row["mode"] != "bridge" || row["ratio"] != num(vs[0].Ratio) || row["ratio_ci95_low"] != num(vs[0].RatioCI[0]) || row["outcome"] != "pass" {
		t.Errorf("verdict row %v", row)
	}
}

// --export values are checked when parsed.
func TestFlag(t *testing.T) {
	var f Flag
	dir := t.TempDir()
	if err := f.Set("junit:" + dir + "/r.xml"); err != nil || len(f) != 1 || f[0].Format != JUnit {
		t.Errorf("junit:FILE: %v %v", f, err)
	}
	for _, bad := range []string{"xml:" + dir + "/r.xml", "csv", "csv:", "csv:" + dir + "/nope/r.csv"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("--export %s was accepted", bad)
		}
	}
	if err := f.Set("csv:" + dir + "/r.csv"); err != nil {
		t.Fatal(err)
	}
	if err := f.Results(testFile()); err != nil {
		t.Fatal(err)
	}
	if err := f.Ratio(&analysis.CellRatio{}); err != nil {
		t.Errorf("ratio to junit and csv: %v", err)
	}
	f = append(f, Target{Format: OpenMetrics, File: dir + "/r.om"})
	if err := f.Compare(&analysis.FileDiff{}, 5); err == nil {
		t.Error("compare wrote OpenMetrics")
	}
}

// findNode is the value of family for the cell, node and CPU class.
func findNode(mfs map[string]*dto.MetricFamily, family string, id results.CellID, node, class string) (float64, bool) {
	mf, ok := mfs[family]
	if !ok {
		return 0, false
	}
	for _, m := range mf.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["node"] != node || labels["class"] != class || labels["placement"] != id.Placement || labels["mode"] != id.Mode || labels["test"] != id.Test {
			continue
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}

// kube run --tolerance: a suite with one case per pod cell against its
// host cell; the cell significantly below the floor fails, the one within
// passes; a file without a tolerance has no such suite.
func TestJUnitOfTolerance(t *testing.T) {
	host := func(pl string) *results.Cell {
		return cell(results.CellID{Mode: "k", Path: "host", Placement: pl, Test: "tcp_stream"}, "Gbit/s", 0, 20, 20.4, 19.8, 20.1, 20.2)
	}
	f := &results.File{SchemaVersion: results.SchemaVersion, Cells: []*results.Cell{
		cell(results.CellID{Mode: "k", Path: "pod", Placement: "same-node", Test: "tcp_stream"}, "Gbit/s", 0, 12, 12.3, 11.8, 12.1, 12.2),
		host("same-node"),
		cell(results.CellID{Mode: "k", Path: "pod", Placement: "cross-node", Test: "tcp_stream"}, "Gbit/s", 0, 19.9, 20.1, 19.7, 20.3, 20),
		host("cross-node"),
	}}
	analysis.Analyze(f.Cells, analysis.Options{})
	var b bytes.Buffer
	if err := Results(&b, JUnit, f); err != nil {
		t.Fatal(err)
	}
	if p := parseJUnit(t, b.Bytes()); len(p.Suites) != 1 || p.Failures != 0 {
		t.Fatalf("without --tolerance: %d suites, %d failures; want only the run's, none failing", len(p.Suites), p.Failures)
	}
	f.Metadata.Settings.Tolerance = 0.1
	b.Reset()
	if err := Results(&b, JUnit, f); err != nil {
		t.Fatal(err)
	}
	p := parseJUnit(t, b.Bytes())
	if len(p.Suites) != 2 || p.Suites[1].Name != "vnetlab "+SuiteTolerance || len(p.Suites[1].Cases) != 2 {
		t.Fatalf("suites %+v, want the run's and a tolerance suite of 2 cases", p.Suites)
	}
	if got := failedCases(p); p.Failures != 1 || len(got) != 1 || got[0] != "k/pod@same-node/tcp_stream / host" {
		t.Errorf("failures %d %v, want only the same-node pod cell (60%% of host)", p.Failures, got)
	}
}

// A cell whose knob was not applied is neither ok nor failed: its status
// series says not-applied, and its JUnit case passes with the kernel's reason.
func TestNotAppliedCellInExports(t *testing.T) {
	c := cell(results.CellID{Mode: "macvlan", Path: "pod", Point: "offload=tso:off", Test: "tcp_stream"}, "Gbit/s", 0)
	c.NotApplied = "tso stays on, not off (the device cannot change it)"
	f := &results.File{SchemaVersion: results.SchemaVersion, Cells: []*results.Cell{c}}
	analysis.Analyze(f.Cells, analysis.Options{})
	var b bytes.Buffer
	if err := Results(&b, OpenMetrics, f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `status="not-applied"`) {
		t.Fatalf("no not-applied status series:\n%s", b.String())
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	set := 0
	for _, m := range mfs["vnetlab_cell_status"].GetMetric() {
		if m.GetGauge().GetValue() != 1 {
			continue
		}
		set++
		for _, l := range m.GetLabel() {
			if l.GetName() == "status" && l.GetValue() != "not-applied" {
				t.Errorf("a not-applied cell set status %s", l.GetValue())
			}
		}
	}
	if set != 1 {
		t.Errorf("%d status series set to 1, want exactly the not-applied one", set)
	}
	vs := CellVerdicts(f)
	if len(vs) != 1 || vs[0].Outcome == Fail || !strings.Contains(vs[0].Message, c.NotApplied) {
		t.Errorf("verdict %+v, want a pass whose message says %q", vs, c.NotApplied)
	}
}

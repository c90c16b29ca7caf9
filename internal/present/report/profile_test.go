package report

import (
	"bytes"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// A profiled run (internal/present/explain/testdata: host, veth-routed, macvlan
// tcp_rr with --profile) gets its "where the CPU goes" section: stage
// bars, sentences, a flame graph per cell and a differential one per
// non-baseline cell, all inline SVG without scripts.
func TestReportOfAProfiledRun(t *testing.T) {
	const dataDir = "../explain/testdata"
	f, err := results.Read(filepath.Join(dataDir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Write(dir, f, dataDir); err != nil {
		t.Fatal(err)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	page := string(html)
	for _, want := range []string{`<h2 id="profile">Where the CPU goes</h2>`, "<title>veth-routed — routing/forwarding: ",
		"veth-routed spends ", "<title>ip_forward: ", "veth-routed vs host: red = more"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if n := strings.Count(page, `<figure class="flame">`); n != 5 {
		t.Errorf("%d flame graphs, want 5 (3 cells + 2 differential)", n)
	}
	if strings.Contains(page, "<script") {
		t.Error("report.html has a script")
	}
	for _, want := range []string{"## Where the CPU goes", "| routing/forwarding | 0.09 | 1.32 | 0.11 |", "macvlan spends "} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}

	// Without the profile files: bars and sentences, and the reason there is no flame graph.
	if _, err := Write(filepath.Join(dir, "nofiles"), f, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	html, _ = os.ReadFile(filepath.Join(dir, "nofiles", "report.html"))
	if !strings.Contains(string(html), "No flame graphs: ") || !strings.Contains(string(html), "veth-routed spends ") {
		t.Error("report without profile files: no reason given, or no sentences")
	}
}

// The stage bars of the profiled run's cells and of a cell not profiled:
// well-formed SVG, a segment per data-path stage with its value on hover,
// never idle or other processes.
func TestStageBars(t *testing.T) {
	f, err := results.Read("../explain/testdata/r.json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []barRow
	for _, c := range f.Cells {
		if c.Profile != nil {
			rows = append(rows, barRow{c.Mode, c.Profile})
		}
	}
	rows = append(rows, barRow{Label: "not profiled"})
	var b bytes.Buffer
	if err := writeStageBars(&b, rows, profile.DefaultRules); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b.Bytes(), new(struct{})); err != nil {
		t.Fatalf("stage bars are not well-formed XML: %v", err)
	}
	for _, want := range []string{"<title>macvlan — macvlan/ipvlan: ", "<title>veth-routed — routing/forwarding: ", "<title>veth-routed — netfilter: filter tables: ", ">not profiled</text>", "µs/transaction"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("stage bars lack %q", want)
		}
	}
	if strings.Contains(b.String(), "— not the data path") || strings.Contains(b.String(), "— idle") {
		t.Error("stage bars draw idle or other processes")
	}
}

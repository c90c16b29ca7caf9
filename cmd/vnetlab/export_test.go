package main

import (
	"encoding/csv"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/kube/bench"
	"github.com/vnetlab/vnetlab/internal/present/export"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
)

// export writes each format of a results file; compare --export junit
// writes one failing case per regression; bad input is one line and exit 1.
func TestExportCommand(t *testing.T) {
	bin := vnetlabBin(t)
	fixture, _ := filepath.Abs("../../internal/present/report/testdata/results.json")
	out, errOut, code := runVnetlab(t, bin, "export", fixture, "--format", "csv")
	if code != 0 {
		t.Fatalf("export csv exited %d: %s", code, errOut)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) < 2 || rows[0][4] != "mode" {
		t.Errorf("export csv: %v, %d rows, header %v", err, len(rows), rows[0])
	}
	om := filepath.Join(t.TempDir(), "r.om")
	if _, errOut, code := runVnetlab(t, bin, "export", fixture, "--format", "openmetrics", "-o", om); code != 0 {
		t.Errorf("export openmetrics exited %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(om); !strings.HasSuffix(string(b), "# EOF\n") {
		t.Errorf("openmetrics file does not end with # EOF: %q", b)
	}
	if _, errOut, code := runVnetlab(t, bin, "export", fixture, "--format", "xml"); code == 0 || !strings.Contains(errOut, "use one of csv, openmetrics, junit") {
		t.Errorf("--format xml: exit %d, %q", code, errOut)
	}

	oldPath, newPath := writeCompareFiles(t)
	junit := filepath.Join(t.TempDir(), "compare.xml")
	_, errOut, code = runVnetlab(t, bin, "compare", oldPath, newPath, "--fail-on-regression", "5%", "--export", "junit:"+junit)
	if code == 0 {
		t.Errorf("compare with a regression exited 0: %s", errOut)
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Failures int `xml:"failures,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
		} `xml:"testsuite>testcase"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("compare's JUnit does not parse: %v", err)
	}
	var failed []string
	for _, c := range doc.Cases {
		if c.Failure != nil {
			failed = append(failed, c.Name)
		}
	}
	if doc.Failures != 1 || len(doc.Cases) != 3 || strings.Join(failed, ",") != "veth-routed|pod||tcp_stream" {
		t.Errorf("compare JUnit: %d cases, failures %d %v; want 3 cases, veth-routed failing", len(doc.Cases), doc.Failures, failed)
	}
	if _, errOut, code := runVnetlab(t, bin, "compare", oldPath, newPath, "--export", "junit"); code == 0 || !strings.Contains(errOut, "want FORMAT:FILE") {
		t.Errorf("--export junit: exit %d, %q", code, errOut)
	}
}

// history over nightly files: exit 0 on a stable history, 1 when the
// newest two runs dropped 20% (--newest 2), with the cell named; a boundary
// (another kernel) is printed.
func TestHistoryCommand(t *testing.T) {
	bin := vnetlabBin(t)
	dir := t.TempDir()
	base := time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC)
	write := func(i int, level float64, kernel string) {
		c := cellOf("bridge", "tcp_crr", "conn/s", level*0.99, level*1.01, level, level*0.995, level*1.005)
		f := &results.File{SchemaVersion: 1, Cells: []*results.Cell{c},
			Metadata: results.Metadata{Vnetlab: "v1", Kernel: kernel, CPUs: 2, Start: base.Add(time.Duration(i) * 24 * time.Hour)}}
		if err := results.Write(filepath.Join(dir, fmt.Sprintf("night-%02d.json", i)), f); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 12 {
		write(i, 10000*(1+0.01*float64(i%3-1)), "6.18.0")
	}
	out, errOut, code := runVnetlab(t, bin, "history", dir, "--detect", "--newest", "2")
	if code != 0 || !strings.Contains(out, "bridge/pod/tcp_crr (conn/s): 12 runs") || !strings.Contains(out, "no significant change") {
		t.Errorf("stable history: exit %d, %s%s", code, out, errOut)
	}
	write(12, 8000, "6.18.0")
	write(13, 8000, "6.18.0")
	out, errOut, code = runVnetlab(t, bin, "history", dir, "--detect", "--newest", "2", "-o", filepath.Join(dir, "report"))
	if code != 1 || !strings.Contains(errOut, "1 of 1 cells regressed significantly in the newest run: bridge/pod/tcp_crr (×0.8") {
		t.Errorf("drop in the newest runs: exit %d, %s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "report", "history-bridge-pod-tcp_crr.svg")); err != nil {
		t.Error(err)
	}
	write(14, 8000, "6.19.0")
	out, _, _ = runVnetlab(t, bin, "history", dir)
	if !strings.Contains(out, "boundary before run 15 (night-14.json): kernel 6.18.0 -> 6.19.0") {
		t.Errorf("kernel boundary not printed:\n%s", out)
	}
	if _, errOut, code := runVnetlab(t, bin, "history", dir, "--across", "moon"); code == 0 || !strings.Contains(errOut, "use kernel, cpus or version") {
		t.Errorf("--across moon: exit %d, %q", code, errOut)
	}
	if _, errOut, code := runVnetlab(t, bin, "history", dir, "--alpha", "1.5"); code == 0 || !strings.Contains(errOut, "--alpha 1.5: a significance level lies between 0 and 1") {
		t.Errorf("--alpha 1.5: exit %d, %q", code, errOut)
	}
}

// run and kube run take --export, checked when the flags are parsed (before
// any lab or cluster exists); kube run carries it to what it executes.
func TestExportFlagOnRuns(t *testing.T) {
	r := newRunFlags(runner.DefaultSpec(), "", "")
	f := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.SetOutput(io.Discard)
	r.register(f)
	if err := f.Parse([]string{"--export", "xml:r.xml"}); err == nil || !strings.Contains(err.Error(), `export format "xml" is unknown`) {
		t.Errorf("run --export xml:r.xml: %v", err)
	}
	dir := t.TempDir()
	k := newKubeRunFlags(bench.DefaultSpec(), "", "")
	cmd := &cobra.Command{}
	k.register(cmd)
	err := cmd.Flags().Parse([]string{"--cluster", "k", "--export", "junit:" + dir + "/k.xml", "--export", "csv:" + dir + "/k.csv"})
	if err == nil {
		_, err = k.resolve(cmd.Flags())
	}
	if err != nil || len(k.exports) != 2 || k.exports[1].Format != export.CSV {
		t.Errorf("kube run --export: %v, %v", k.exports, err)
	}
}

package main

import (
	"encoding/csv"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// export writes each format of a results file; compare --export junit
// writes one failing case per regression; bad input is one line and exit 1.
func TestExportCommand(t *testing.T) {
	bin := vnetlabBin(t)
	fixture, _ := filepath.Abs("../../internal/report/testdata/results.json")
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

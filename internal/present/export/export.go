// Package export writes vnetlab's results where people already keep numbers:
// a spreadsheet (csv.go), a Prometheus/OpenMetrics stack (openmetrics.go)
// and a CI system's test report (junit.go). Every writer is a pure function
// of a results file or of typed verdicts (internal/results/analysis); flag.go reads
// --export FORMAT:FILE for the verbs that take it.
package export

import (
	"fmt"
	"io"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Format is an export format.
type Format string

const (
	CSV         Format = "csv"
	OpenMetrics Format = "openmetrics"
	JUnit       Format = "junit"
)

// Formats lists every format, in help order.
var Formats = []Format{CSV, OpenMetrics, JUnit}

// ParseFormat reads a format name.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("export format %q is unknown: use one of %s", s, formatList())
}

func formatList() string {
	var n []string
	for _, f := range Formats {
		n = append(n, string(f))
	}
	return strings.Join(n, ", ")
}

// Results writes a results file in format: one CSV row per cell, the
// OpenMetrics exposition of its cells, or a JUnit suite with a test case
// per cell that fails when the cell's outcome contradicts the run's
// prediction (what makes `run` exit 1), and, for a `kube run --tolerance`,
// a suite with a case per pod cell against host.
func Results(w io.Writer, format Format, f *results.File) error {
	switch format {
	case CSV:
		return CellsCSV(w, f)
	case OpenMetrics:
		return CellsOpenMetrics(w, f)
	case JUnit:
		return WriteJUnit(w, append(CellVerdicts(f), ToleranceVerdicts(f)...))
	}
	return fmt.Errorf("export format %q is unknown: use one of %s", format, formatList())
}

// Verdicts writes judged comparisons (compare, ratio) in format: a CSV row
// or a JUnit test case each. OpenMetrics describes measurements, not
// verdicts, so it is refused here.
func Verdicts(w io.Writer, format Format, vs []Verdict) error {
	switch format {
	case CSV:
		return VerdictsCSV(w, vs)
	case JUnit:
		return WriteJUnit(w, vs)
	}
	return fmt.Errorf("export format %s is for results files (run, kube run, export): compare and ratio export csv or junit", format)
}

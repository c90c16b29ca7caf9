package export

import (
	"encoding/csv"
	"io"
	"strconv"
	"time"

	"github.com/vnetlab/vnetlab/internal/results"
)

// The CSV columns after the cell's coordinates (results.CoordinateNames).
// Numbers are written exactly (shortest round-tripping decimal); a number
// that does not exist (a failed cell's median, a missing CI or CPU block) is
// an empty field, never 0.
var cellColumns = []string{
	"unit", "status", "valid_samples", "failed_samples",
	"median", "ci95_low", "ci95_high", "ci_method", "cv", "noisy",
	"cpu_busy_s", "cpu_user_s", "cpu_system_s", "cpu_softirq_s", "cpu_s_per_gb", "cpu_s_per_1k_trans",
}

// runColumns come first: which run the row belongs to, so that the CSVs of
// many runs can be concatenated.
var runColumns = []string{"run_start", "vnetlab_version", "kernel", "cpus"}

// CellsHeader is the header row of CellsCSV.
func CellsHeader() []string {
	h := append([]string(nil), runColumns...)
	h = append(h, results.CoordinateNames()...)
	return append(h, cellColumns...)
}

// CellsCSV writes one row per cell: the run, every coordinate of the
// cell's CellID, then cellColumns.
func CellsCSV(w io.Writer, f *results.File) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CellsHeader()); err != nil {
		return err
	}
	m := f.Metadata
	run := []string{timestamp(m.Start), m.Vnetlab, m.Kernel, strconv.Itoa(m.CPUs)}
	for _, c := range f.Cells {
		row := append([]string(nil), run...)
		for _, co := range c.ID().Coordinates() {
			row = append(row, co.Value)
		}
		row = append(row, c.Unit, c.Status, strconv.Itoa(c.Valid), strconv.Itoa(c.Failed))
		if c.Valid > 0 {
			row = append(row, num(c.Median))
		} else {
			row = append(row, "")
		}
		if len(c.CI95) == 2 {
			row = append(row, num(c.CI95[0]), num(c.CI95[1]), c.CIMethod)
		} else {
			row = append(row, "", "", "")
		}
		if c.Valid >= 2 {
			row = append(row, num(c.CV), strconv.FormatBool(c.Noisy))
		} else {
			row = append(row, "", "")
		}
		if p := c.CPU; p != nil {
			row = append(row, num(p.BusySec), num(p.UserSec), num(p.SystemSec), num(p.SoftirqSec), optional(p.PerGB), optional(p.PerKTrans))
		} else {
			row = append(row, "", "", "", "", "", "")
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// VerdictsHeader is the header row of VerdictsCSV.
func VerdictsHeader() []string {
	h := []string{"suite", "name"}
	h = append(h, results.CoordinateNames()...)
	return append(h, "reference", "measurement", "verdict", "outcome", "ratio", "ratio_ci95_low", "ratio_ci95_high", "p_value", "target", "message")
}

// VerdictsCSV writes one row per verdict (compare, ratio).
func VerdictsCSV(w io.Writer, vs []Verdict) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(VerdictsHeader()); err != nil {
		return err
	}
	for _, v := range vs {
		row := []string{v.Suite, v.Name}
		for _, co := range v.Cell.Coordinates() {
			row = append(row, co.Value)
		}
		row = append(row, v.Reference, v.Measurement, v.Verdict, v.Outcome.String())
		if v.HasP || v.HasCI {
			row = append(row, num(v.Ratio))
		} else {
			row = append(row, "")
		}
		if v.HasCI {
			row = append(row, num(v.RatioCI[0]), num(v.RatioCI[1]))
		} else {
			row = append(row, "", "")
		}
		if v.HasP {
			row = append(row, num(v.P))
		} else {
			row = append(row, "")
		}
		row = append(row, v.Target, v.Message)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// num writes x exactly: the shortest decimal that parses back to x.
func num(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// optional is num, or "" for a figure the cell does not have (0: a stream
// has no cost per transaction).
func optional(x float64) string {
	if x == 0 {
		return ""
	}
	return num(x)
}

func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

package main

import (
	"fmt"
	"os"

	"github.com/vnetlab/vnetlab/internal/analysis"
	"github.com/vnetlab/vnetlab/internal/export"
	"github.com/vnetlab/vnetlab/internal/report"
	"github.com/vnetlab/vnetlab/internal/results"
)

// emitResults prints the table and summary of a finished run, writes the
// results JSON, the report and the exports when asked, and returns runErr,
// or an error naming the cells that failed unexpectedly.
func emitResults(res *results.File, output, reportDir string, exports export.Flag, runErr error) error {
	report.Table(os.Stdout, res, false)
	report.Summary(os.Stdout, res)
	if output != "" {
		if err := results.Write(output, res); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "results written to %s\n", output)
	}
	if reportDir != "" {
		if err := writeReport(reportDir, res, resultsDir(output)); err != nil {
			return fmt.Errorf("--report %s: %w", reportDir, err)
		}
	}
	if err := exports.Results(res); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	// A cell that failed as the run predicted is a result, not an error.
	return analysis.Problems(res.Cells)
}

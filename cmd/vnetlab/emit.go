package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vnetlab/vnetlab/internal/present/export"
	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// emitResults prints the table and summary of a finished run (and a kube
// run's --tolerance checks), writes the results JSON, the report and the
// exports when asked, and returns runErr, or an error naming the cells that
// failed unexpectedly, or the pod cells below the tolerance.
func emitResults(res *results.File, output, reportDir string, exports export.Flag, runErr error) error {
	report.Table(os.Stdout, res, false)
	report.Summary(os.Stdout, res)
	var checks []analysis.HostCheck
	if tol := res.Metadata.Settings.Tolerance; tol > 0 {
		checks = analysis.HostChecks(res.Cells, tol)
		report.Tolerance(os.Stdout, tol, checks)
	}
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
	if err := analysis.Problems(res.Cells); err != nil {
		return err
	}
	return analysis.ToleranceError(checks)
}

// defaultProfileDir: beside the results file (r.json -> r.profile/), else
// vnetlab-profile/ in the working directory.
func defaultProfileDir(output string) string {
	if output == "" {
		return "vnetlab-profile"
	}
	return strings.TrimSuffix(output, filepath.Ext(output)) + ".profile"
}

// resultsDir is the directory of the results file ("." without one): the
// cells' profile dirs are relative to it.
func resultsDir(output string) string {
	if output == "" {
		return "."
	}
	return filepath.Dir(output)
}

// relativeProfileDirs makes each cell's profile dir relative to the results
// file's directory, so that the file and its profiles can move together.
func relativeProfileDirs(res *results.File, output string) {
	base := resultsDir(output)
	for _, c := range res.Cells {
		if c.Profile == nil || c.Profile.Dir == "" {
			continue
		}
		if rel, err := filepath.Rel(base, c.Profile.Dir); err == nil {
			c.Profile.Dir = filepath.ToSlash(rel)
		}
	}
}

package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/vnetlab/vnetlab/internal/report"
	"github.com/vnetlab/vnetlab/internal/results"
)

// emitResults prints the table and summary of a finished run, writes the
// results JSON and the report when asked, and returns runErr, or an error
// naming the cells that got no valid sample.
func emitResults(res *results.File, output, reportDir string, runErr error) error {
	report.Table(os.Stdout, res, false)
	report.Summary(os.Stdout, res)
	if output != "" {
		if err := results.Write(output, res); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "results written to %s\n", output)
	}
	if reportDir != "" {
		if err := writeReport(reportDir, res); err != nil {
			return fmt.Errorf("--report %s: %w", reportDir, err)
		}
	}
	if runErr != nil {
		return runErr
	}
	var failed []string
	for _, c := range res.Cells {
		if c.Valid == 0 {
			name := c.Mode + "/" + c.Path + "/" + c.Test
			if c.Provider != "" {
				name = fmt.Sprintf("%s/%s(%s)/%s", c.Mode, c.Path, c.Provider, c.Test)
			}
			if c.Placement != "" {
				name += "@" + c.Placement
			}
			failed = append(failed, name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d cells have no valid sample (%s): see the errors above and in the results JSON", len(failed), strings.Join(failed, ", "))
	}
	return nil
}

package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results"
)

func init() { extraCommands = append(extraCommands, newReportCmd) }

func newReportCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "report results.json -o DIR",
		Short: "Write a Markdown and a one-file HTML report, with SVG/PNG charts, from a results JSON",
		Long: `Write DIR/report.md, DIR/report.html (one self-contained file that works offline:
inline CSS, charts inline as SVG) and every chart as .svg and .png:
  - per test, a bar chart of medians with 95% CI error bars, grouped by mode;
  - each value as a ratio to the run's ceiling (the host cell: loopback in one namespace);
  - CPU-seconds per GB / per 1k transactions by class (user, system, softirq) when recorded;
  - the seeds' published numbers beside ours, as ratios, with "agrees"/"disagrees";
  - the run's metadata: machine, kernel, CPUs, tool versions, command line, settings, skipped modes.`,
		Example: `  vnetlab report results.json -o report/
  vnetlab run -f scenarios/seed-002-pod-modes.yaml --report report/`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("report needs one results file: vnetlab report results.json -o DIR")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return fmt.Errorf("no output directory: add -o DIR (e.g. vnetlab report %s -o report)", args[0])
			}
			f, err := results.Read(args[0])
			if err != nil {
				return err
			}
			return writeReport(dir, f, filepath.Dir(args[0]))
		},
	}
	cmd.Flags().StringVarP(&dir, "output", "o", "", "directory to write report.md, report.html and the charts into")
	return cmd
}

// writeReport is shared with run --report; resultsDir is where the results
// file is (the profiles' files are relative to it).
func writeReport(dir string, f *results.File, resultsDir string) error {
	files, err := report.Write(dir, f, resultsDir)
	if err != nil {
		return err
	}
	stderrf("report written: %s (and %d more files in %s)", files[1], len(files)-1, dir)
	return nil
}

// checkReportDir refuses, before a run starts, a --report directory that
// could not be written at its end.
func checkReportDir(dir string) error {
	if dir == "" {
		return nil
	}
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("--report %s: exists and is not a directory: choose another path", dir)
		}
		return nil
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return fmt.Errorf("--report %s: parent directory %s does not exist: create it first", dir, parent)
	}
	return nil
}

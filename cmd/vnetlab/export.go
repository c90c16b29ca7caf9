package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/present/export"
	"github.com/vnetlab/vnetlab/internal/results"
)

func init() { extraCommands = append(extraCommands, newExportCmd) }

func newExportCmd() *cobra.Command {
	var format, out string
	cmd := &cobra.Command{
		Use:   "export results.json --format csv|openmetrics|junit [-o FILE]",
		Short: "Write a results file as CSV, OpenMetrics text or JUnit XML (spreadsheets, Prometheus, CI reports)",
		Long: `Write a results JSON where people already keep numbers (docs/exports.md):
  csv          one row per cell: the run, every coordinate of the cell (mode, path, provider,
               extra_services, placement, test, ...), unit, status, samples, median, 95% CI, CV,
               CPU cost; numbers exact, an absent number an empty field
  openmetrics  Prometheus/OpenMetrics text: per cell its median and CI in base units
               (vnetlab_throughput_bytes_per_second, vnetlab_transactions_per_second, ...),
               status, CV, CPU seconds per byte or transaction, latency; coordinates as labels
  junit        a test case per cell, failing when the cell failed unpredicted (what makes run
               exit 1); compare and ratio write their verdicts as JUnit with --export

run, kube run, compare and ratio write the same with --export FORMAT:FILE (repeatable).`,
		Example: `  vnetlab export r.json --format csv -o r.csv
  vnetlab export r.json --format openmetrics | promtool check metrics
  vnetlab run --modes bridge --tests tcp_stream --export junit:run.xml --export csv:run.csv`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("export needs one results file: vnetlab export r.json --format csv")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			fm, err := export.ParseFormat(format)
			if err != nil {
				return fmt.Errorf("--format: %w", err)
			}
			f, err := results.Read(args[0])
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if err := export.Results(&b, fm, f); err != nil {
				return err
			}
			if out == "" {
				_, err = os.Stdout.Write(b.Bytes())
				return err
			}
			return os.WriteFile(out, b.Bytes(), 0o644)
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "csv, openmetrics or junit")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write here instead of standard output")
	return cmd
}

package main

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/present/export"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

func init() { extraCommands = append(extraCommands, newRatioCmd) }

func newRatioCmd() *cobra.Command {
	var target, metric string
	var exports export.Flag
	cmd := &cobra.Command{
		Use:   "ratio results.json NUM DEN [--target '>=1.00'] [--metric value|cpu-per-gb|cpu-per-1k]",
		Short: "One cell over another of the same run: the ratio of medians, its bootstrap 95% CI, and whether it meets a target",
		Long: `Divide cell NUM by cell DEN of one results file (cells measured side by side in one
interleaved run) and print one line: both names, the ratio of their medians, its 95%
percentile-bootstrap CI (the same resampling as run's "vs" columns), and with --target
where that CI lies: MET (the whole CI is on the target's side), SHORT (the whole CI
misses it) or UNRESOLVED (the CI holds the target: more repeats or a quieter machine).

Cells are named as run's progress lines name them: MODE/PATH/TEST, the service path with
its provider and generated Services, e.g. veth-ebpf/pod/tcp_rr,
veth-routed/service(ebpf)/tcp_crr, veth-routed/service(ebpf+10000)/tcp_crr; an IPv6 cell
(--ip-family ipv6 or dual) has its family before the test: veth-routed/pod/ipv6/tcp_rr.

--metric cpu-per-gb divides each sample's busy CPU-seconds per GB instead (streams;
lower is better: use --target '<=1.00'), cpu-per-1k per 1000 transactions (rr/crr).
The exit status is 0 whatever the outcome; a missing cell or metric exits 1.`,
		Example: `  vnetlab ratio bench.json veth-ebpf/pod/tcp_rr macvlan/pod/tcp_rr --target '>=1.00'
  vnetlab ratio dual.json veth-routed/pod/ipv6/tcp_rr veth-routed/pod/ipv4/tcp_rr
  vnetlab ratio bench.json veth-ebpf/pod/tcp_stream macvlan/pod/tcp_stream --metric cpu-per-gb --target '<=1.00'
  scripts/bench-paths.sh   # every row of the eBPF data-path table (docs/performance.md), from one run`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 3 {
				return fmt.Errorf("ratio needs a results file and two cells: vnetlab ratio r.json veth-ebpf/pod/tcp_rr macvlan/pod/tcp_rr")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			m := analysis.Metric(metric)
			if !slices.Contains(analysis.Metrics, m) {
				return fmt.Errorf("--metric %s: want one of %v", metric, analysis.Metrics)
			}
			var tgt *analysis.Target
			if target != "" {
				t, err := analysis.ParseTarget(target)
				if err != nil {
					return fmt.Errorf("--target: %w", err)
				}
				tgt = &t
			}
			f, err := results.Read(args[0])
			if err != nil {
				return err
			}
			r, err := analysis.RatioOf(f, args[1], args[2], m, tgt)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), r)
			return exports.Ratio(r)
		},
	}
	cmd.Flags().StringVar(&target, "target", "", "what the ratio must reach: >=R or <=R (e.g. >=0.97)")
	export.AddFlag(cmd.Flags(), &exports)
	cmd.Flags().StringVar(&metric, "metric", string(analysis.MetricValue), "what to divide: value (the test's number), cpu-per-gb, cpu-per-1k")
	return cmd
}

package main

import (
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
)

// newKubeConvergeReportCmd is the scale table and chart of many kube
// converge files (latency against N per proxy).
func newKubeConvergeReportCmd() *cobra.Command {
	var kind, svg string
	var reanalyze bool
	kinds := append(slices.Clone(converge.ServiceKinds), converge.KindAllowAdded, converge.KindAllowDeleted, converge.KindLabelRemoved, converge.KindLabelAdded) // a kind no run has is no row
	cmd := &cobra.Command{
		Use:   "converge-report FILE.json... [--kinds K,...] [--chart-kind endpoint-added] [--svg chart.svg]",
		Short: "Tabulate kube converge files side by side (per proxy, E, pause and N) and chart a kind's p99 against N",
		Long: `Reads kube converge -o files (one per proxy, number of other Services N, endpoints each E
and --pause between changes: a proxy with a minimum sync period, such as kube-proxy's 1 s,
reads its period under the default 50ms-250ms and a change's own cost under 1.5s-2s)
and prints, per kind of change, the slowest node's p50 and p99 with their 95% CIs, the
changes not applied, the write calls' p50 and the latency after the write's answer (p50 / p99:
the proxy's watch, its sync and the data path), the proxy's own metric beside them and how many of its values said
done before a packet showed the change, connections broken, the proxies' CPU seconds (while
N was made / during the changes) and RSS, the API server's and etcd's RSS, the eBPF maps'
memory, tcp_crr to the newest Service as a ratio to the same proxy's N = 0 run (any E), and the
CPU seconds of the machine's other work during the changes ("(N DISTURBED)": the changes it
overlapped above 0.1 CPUs; measure those runs again).
--svg draws --chart-kind's p99 against N, both axes logarithmic, one line per proxy, E and pause.
Runs those alone would merge are named apart: a proxy measured on two CNI data paths by the
path ("iptables (on veth-ebpf)"), a proxy, E, pause and N measured again by its order ("run 2").
--reanalyze computes the latencies again from each file's probes with this version's analysis
(a deletion now shows at the start of the last run of unanswered probes, where older versions
took the first: a prober starved while kube-proxy iptables synced read an early silence as done).`,
		Example: `  vnetlab kube converge-report out/*.json --svg converge.svg   # as scripts/bench-converge.sh runs it`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var runs []report.ConvergeRun
			for _, f := range args {
				b, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				c, err := results.ParseConvergence(f, b)
				if err != nil {
					return err
				}
				if reanalyze {
					runner.Reanalyze(c)
				}
				runs = append(runs, report.ConvergeRun{File: f, C: c})
			}
			report.PrintConvergeTable(os.Stdout, runs, kinds)
			if svg == "" {
				return nil
			}
			return os.WriteFile(svg, []byte(report.ConvergeChart(runs, kind).SVG(true)), 0o644)
		},
	}
	cmd.Flags().StringSliceVar(&kinds, "kinds", kinds, "kinds of change in the table")
	cmd.Flags().StringVar(&kind, "chart-kind", converge.KindEndpointAdded, "the kind the chart draws (endpoint-added: the SLO's EndpointSlice change)")
	cmd.Flags().StringVar(&svg, "svg", "", "write the chart here")
	cmd.Flags().BoolVar(&reanalyze, "reanalyze", false, "compute the latencies again from the files' probes with this version's analysis")
	return cmd
}

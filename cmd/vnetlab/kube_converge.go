package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/kube/bench"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results"
)

// newKubeConvergeCmd measures network programming latency.
func newKubeConvergeCmd() *cobra.Command {
	spec := bench.DefaultConvergeSpec()
	var cf clusterFlags
	var output string
	cmd := &cobra.Command{
		Use:   "converge (--cluster NAME | --kubeconfig PATH [--context C]) [--changes 200] [--interval 1ms] [-o converge.json]",
		Short: "Measure network programming latency: from a change written through the API to the first packet that honours it, on every node",
		Long: `A prober pod on every Ready node probes the Service's UDP ports every --interval, each
probe from a new socket, reports every change of what answers, and holds TCP connections
through it to each backend, reporting any that breaks. The run writes --changes changes
through the API one at a time, cycling through: the Service created (measured to the first
answer), an endpoint added (to the first answer from the new backend), that endpoint removed
(to the end of its last answers; and what became of connections to it), the Service's port
changed (to the first answer on the new port) and the Service deleted (to the start of the
last run of probes not answered: an answer after a silent probe, a prober starved while a
proxy syncs, means not yet; the removal and deletion are waited for with a prober's evidence
that they hold). Each is timestamped just before its write, waited for on every node
(--change-timeout: a node that did not show it by then "did not apply" it), then followed by
a random pause (--pause, 50ms-250ms; kube-proxy syncs at most once a second, so with pauses
shorter than that a change mostly waits for its next sync: --pause 1.5s-2s measures each change
alone). The table gives p50/p90/p99 (bootstrap 95% CIs) and the
largest, per kind and node, and per change on its slowest node ("all nodes"), the write
calls' own p50 (WRITE) and the latency after the write's answer (AFTER WRITE); the
resolution is --interval. --extra-services N creates N other Services first (--extra-endpoints
E each; --keep-extra keeps them for the next run); on a local cluster the etcd, API server
and proxies' CPU and memory are measured while they are made, idle and during the changes,
and each proxy's own metrics are scraped after each change (the table's METRIC). There, the
CPU of the machine's other processes (outside the cluster and vnetlab: a compile beside the
run) is measured too, in 10 s samples: a change that overlapped more than 0.1 CPUs of it is
flagged (a warning, and DISTURBED in kube converge-report's table). On a local cluster the
probers' own UDP flows get a conntrack timeout of 1 s on the nodes (--probe-conntrack-timeout;
the workload's keep the kernel's 30 s): a probe is a flow, so otherwise each prober would keep
some 30,000 entries per target, which kube-proxy's conntrack reconciler lists after each sync
that took a UDP endpoint away, slowing the very changes measured. An unmeasured
creation and deletion of the Service, each followed on every node, comes before the first
measured change (the cluster may still be working through earlier writes). The changes
start at the EndpointSlice's write, which the run makes itself; in a cluster the EndpointSlice
controller makes it after a pod changed: --controller-changes times that share apart, after
the changes. Everything created is deleted at the end, also on Ctrl-C.

--policy measures NetworkPolicy apply latency instead (a switch, not a count: the policies
present are --extra-policies, as --extra-services counts Services): one pod is isolated for
ingress and probed at its pod IP (UDP, no Service); a policy admitting the probers is created
(allow-added: to the first answered probe on each node), the probed pod's label that policy
selects it by taken away (label-removed: to the start of the last unanswered run) and given
back (label-added: to the first answered probe), and the policy deleted (allow-deleted: to the
start of the last unanswered run), in turn. --extra-policies N other policies select that pod first,
admitting none of the probers, so the enforcer evaluates them with each change. Refused on a
local cluster whose enforcer is none (kube up --network-policy).`,
		Example: `  vnetlab kube converge --cluster k
  vnetlab kube converge --cluster k --extra-services 10000 --extra-endpoints 10 --keep-extra -o k-10k.json
  vnetlab kube converge --kubeconfig ~/.kube/config --changes 400 -o prod-converge.json
  vnetlab kube converge --cluster k --policy --extra-policies 1000 --changes 400 -o k-pol-1k.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec.Local, spec.Kubeconfig, spec.Context = cf.cluster, cf.kubeconfig, cf.context
			if spec.Local != "" && (spec.Kubeconfig != "" || spec.Context != "") {
				return fmt.Errorf("give either --cluster or --kubeconfig/--context, not both")
			}
			if err := spec.Check(); err != nil {
				return err
			}
			return runConvergence(cmd, output, func(ctx context.Context, say func(string, ...any)) (*results.Convergence, error) {
				return bench.Converge(ctx, spec, say)
			})
		},
	}
	cf.add(cmd)
	f := cmd.Flags()
	registerPaceFlags(f, &spec.Pace, kindsHelp(converge.ServiceKinds)+", or with --policy "+kindsHelp(converge.PolicyLabelKinds))
	f.DurationVar(&spec.FlowTimeout, "probe-conntrack-timeout", spec.FlowTimeout, "the conntrack timeout of the probers' own UDP flows on a local cluster's nodes (a probe is a flow: with the kernel's 30 s, a prober keeps some 30,000 entries per target, which kube-proxy's conntrack reconciler lists after each sync that took a UDP endpoint away); whole seconds; 0: the kernel's")
	f.IntVar(&spec.ExtraServices, "extra-services", 0, "other Services the cluster holds while the changes are measured (created first, deleted after unless --keep-extra); refused before anything is made when a local cluster's API server and etcd could not hold them")
	f.IntVar(&spec.ExtraEndpoints, "extra-endpoints", spec.ExtraEndpoints, "endpoints of each extra Service")
	f.BoolVar(&spec.KeepExtra, "keep-extra", false, "keep the extra Services for the next run on this cluster (with as many endpoints each), which reuses them and makes or deletes only the difference")
	f.BoolVar(&spec.Policy, "policy", false, "measure NetworkPolicy changes (a policy admitting the probers to an isolated pod, created and deleted) instead of Service changes")
	f.IntVar(&spec.ExtraPolicies, "extra-policies", 0, "with --policy: other NetworkPolicies selecting the probed pod, admitting none of the probers, created first and deleted after")
	f.IntVar(&spec.ControllerChanges, "controller-changes", spec.ControllerChanges, "after the changes, time the EndpointSlice controller's share apart: a backend's label set and removed this many times, each from the pod's write to its Service's slice seen in a watch (0: not measured)")
	f.DurationVar(&spec.CRR, "crr", 0, "after the changes, tcp_crr to a Service made last (after the N others), 5 samples of this length (0: not measured)")
	f.StringVar(&spec.Image, "image", "", "image with vnetlab in /usr/bin (default: vnetlab's own, loaded into a local cluster)")
	f.StringVarP(&output, "output", "o", "", "write every change, its latency per node and the table's rows as JSON here")
	return cmd
}

// runConvergence runs measure (kube converge, svc converge, policy
// converge) as runMeasured does: a convergence file's table and writer.
func runConvergence(cmd *cobra.Command, output string, measure func(ctx context.Context, say func(string, ...any)) (*results.Convergence, error)) error {
	return runMeasured(cmd, output, measure, report.PrintConvergence, results.WriteConvergence)
}

// runMeasured runs measure (the kube converge and readiness verbs, svc and
// policy converge) until it returns or Ctrl-C, its progress on stderr, then
// prints its table on stdout and writes it to output ("": nowhere).
func runMeasured[T any](cmd *cobra.Command, output string, measure func(ctx context.Context, say func(string, ...any)) (T, error), table func(io.Writer, T), write func(path string, v T) error) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	say := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	v, err := measure(ctx, say)
	if err != nil {
		return err
	}
	table(os.Stdout, v)
	if output == "" {
		return nil
	}
	if err := write(output, v); err != nil {
		return err
	}
	say("wrote %s", output)
	return nil
}

// registerPaceFlags binds the changes' pace (kube converge, svc converge,
// policy converge); cycle names the kinds --changes cycles through.
func registerPaceFlags(f *pflag.FlagSet, p *converge.Pace, cycle string) {
	f.IntVar(&p.Changes, "changes", p.Changes, "changes to write, cycling through "+cycle)
	f.DurationVar(&p.Interval, "interval", p.Interval, "between a prober's probes: the latencies' resolution")
	f.DurationVar(&p.ProbeTimeout, "probe-timeout", p.ProbeTimeout, "a probe unanswered for this long was not answered")
	f.DurationVar(&p.ChangeTimeout, "change-timeout", p.ChangeTimeout, "a prober that has not shown a change by then did not apply it (counted apart, never a latency)")
	f.Var((*pauseValue)(p), "pause", "random pause after a change is shown, before the next: MIN-MAX or one duration (longer than a proxy's minimum sync period, such as 1.5s-2s for kube-proxy's 1 s, measures each change alone)")
}

// kindsHelp names a cycle's kinds for --changes' help.
func kindsHelp(kinds []string) string {
	return fmt.Sprintf("the %d kinds (%s)", len(kinds), strings.Join(kinds, ", "))
}

// pauseValue is --pause over a Pace's PauseMin and PauseMax.
type pauseValue converge.Pace

func (v *pauseValue) String() string { return converge.FormatPause(v.PauseMin, v.PauseMax) }
func (v *pauseValue) Type() string   { return "MIN-MAX" }
func (v *pauseValue) Set(s string) (err error) {
	v.PauseMin, v.PauseMax, err = converge.ParsePause(s)
	return err
}

// newKubeProbeCmd is converge's prober, run in a pod on each node.
func newKubeProbeCmd() *cobra.Command {
	var c converge.ProbeConfig
	var targets []string
	var keep string
	cmd := &cobra.Command{
		Use:    "probe --node NAME --target IP:PORT... [--keep IP:PORT] [--interval 1ms] [--timeout 100ms]",
		Short:  "Probe UDP Service ports every interval and print each change of what answers, and that an answer has held, as JSON lines (kube converge runs it)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, t := range targets {
				ap, err := netip.ParseAddrPort(t)
				if err != nil {
					return fmt.Errorf("--target %q: want IP:PORT (%v)", t, err)
				}
				c.Targets = append(c.Targets, ap)
			}
			if keep != "" {
				ap, err := netip.ParseAddrPort(keep)
				if err != nil {
					return fmt.Errorf("--keep %q: want IP:PORT (%v)", keep, err)
				}
				c.Keep = ap
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return converge.Probe(ctx, c, os.Stdout)
		},
	}
	cmd.Flags().StringVar(&c.Node, "node", "", "the node's name, in every line")
	cmd.Flags().StringArrayVar(&targets, "target", nil, "a Service's clusterIP:port (UDP; its backends answer with their name); repeat for more")
	cmd.Flags().StringVar(&keep, "keep", "", "a Service's TCP clusterIP:port whose backends answer every line (whoami --tcp-keep): hold a connection to each backend and report when one breaks")
	cmd.Flags().DurationVar(&c.Interval, "interval", time.Millisecond, "between probes")
	cmd.Flags().DurationVar(&c.Timeout, "timeout", 100*time.Millisecond, "a probe unanswered for this long was not answered")
	return cmd
}

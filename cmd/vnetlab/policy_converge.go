package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
)

// newPolicyConvergeCmd measures a policy's apply latency in a lab.
func newPolicyConvergeCmd() *cobra.Command {
	spec := labpolicy.ConvergeSpec{Pace: converge.DefaultPace()}
	var output string
	cmd := &cobra.Command{
		Use:   "converge LAB [--provider P] [--policies N] [--ipblocks M] [--changes 200] [--interval 1ms] [-o apply.json]",
		Short: "Measure a policy provider's apply latency: from a policy added or deleted to the first packet it lets through or drops",
		Long: `The lab's first pod answers UDP probes (port 5353) and is isolated for ingress; every other
pod probes it every --interval and is a row of the table. A policy allowing the probers is
added through the lab's policy transaction (as policy add writes it), then deleted (as policy
del), in turn: each change's latency is from its write to the first probe answered (added) or
unanswered (deleted). --policies and --ipblocks generate that many policies selecting the
probed pod first (as the run's policy knobs do), so each change is applied beside them. The
lab must have no policies; it has none again afterwards. The CPU of the machine's other
processes (outside the lab and vnetlab) is measured beside the changes, as kube converge
measures it: a change that overlapped more than 0.1 CPUs of it is flagged.`,
		Example: `  vnetlab up --name p --mode veth-routed && vnetlab policy converge p --provider nftables
  vnetlab policy converge p --provider iptables --policies 10000 --changes 40 -o p-ipt-10k.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			spec.Lab = args[0]
			if spec.Provider != "" {
				if _, err := labpolicy.Get(spec.Provider); err != nil {
					return err
				}
			}
			for k, n := range map[knob.Name]int{knob.Policies: spec.Policies, knob.IPBlocks: spec.IPBlocks} {
				if err := knob.CheckValue(k, fmt.Sprint(n)); err != nil {
					return fmt.Errorf("--%s: %v", k, err)
				}
			}
			if err := spec.Pace.Check(converge.PolicyKinds); err != nil {
				return err
			}
			return runConvergence(cmd, output, func(ctx context.Context, say func(string, ...any)) (*results.Convergence, error) {
				run, err := labpolicy.Converge(ctx, spec, say)
				if err != nil {
					return nil, err
				}
				return runner.ConvergenceOf(run, say), nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Provider, "provider", "", strings.Join(labpolicy.Names(), ", ")+" (default "+labpolicy.DefaultProvider+")")
	f.IntVar(&spec.Policies, "policies", 0, "generated policies selecting the probed pod, present while the changes are written")
	f.IntVar(&spec.IPBlocks, "ipblocks", 0, "address blocks of one more generated policy selecting the probed pod")
	registerPaceFlags(f, &spec.Pace, kindsHelp(converge.PolicyKinds))
	f.StringVarP(&output, "output", "o", "", "write every change, its latency per prober and the rows as JSON here")
	return cmd
}

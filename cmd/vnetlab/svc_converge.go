package main

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
)

// newSvcConvergeCmd is kube converge's lab floor.
func newSvcConvergeCmd() *cobra.Command {
	spec := labservice.FloorSpec{Pace: converge.DefaultPace()}
	var vip, output string
	cmd := &cobra.Command{
		Use:   "converge LAB [--provider P] [--changes 200] [--interval 1ms] [-o floor.json]",
		Short: "Measure a lab provider's network programming latency: kube converge's changes, written without an API server",
		Long: `The changes kube converge writes through a cluster's API (a Service created, an endpoint
added, then removed, the Service deleted), written here through the lab's own Service
transaction, as svc add and svc del write them: the floor under a cluster's latency, what
the provider's write alone costs. The lab's first two pods answer as backends; every other
pod probes the Service (10.96.47.1:53/udp, --vip) every --interval and is a row of the
table. A lab with Services keeps its provider; --provider chooses one for a lab without.
The CPU of the machine's other processes (outside the lab and vnetlab) is measured beside
the changes, as kube converge measures it: a change that overlapped more than 0.1 CPUs of
it is flagged.`,
		Example: `  vnetlab up --name f --mode veth-routed --pods 3 && vnetlab svc converge f --provider nftables
  vnetlab svc converge f --changes 400 -o f-nftables.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			spec.Lab = args[0]
			if vip != "" {
				a, err := netip.ParseAddr(vip)
				if err != nil {
					return fmt.Errorf("--vip %q: want an address such as %s", vip, labservice.DefaultFloorVIP)
				}
				spec.VIP = a
			}
			if err := spec.Pace.Check(converge.ServiceKinds); err != nil {
				return err
			}
			return runConvergence(cmd, output, func(ctx context.Context, say func(string, ...any)) (*results.Convergence, error) {
				run, err := labservice.Floor(ctx, spec, say)
				if err != nil {
					return nil, err
				}
				return runner.ConvergenceOf(run, say), nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Provider, "provider", "", "provider for a lab without Services (default: the mode's)")
	f.StringVar(&vip, "vip", "", "the changed Service's address (default "+labservice.DefaultFloorVIP.String()+")")
	registerPaceFlags(f, &spec.Pace, kindsHelp(converge.ServiceKinds))
	f.StringVarP(&output, "output", "o", "", "write every change, its latency per prober and the rows as JSON here")
	return cmd
}

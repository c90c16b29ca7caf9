package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/platform/labservice"
)

func init() { extraCommands = append(extraCommands, newSvcCmd) }

func newSvcCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "svc",
		Short: "Add, list and delete a running lab's Services (clusterIP:port -> pod backends)",
		Long: `A Service is clusterIP:port/proto in front of pod backends, realised in the lab by a
provider, as kube-proxy or an eBPF CNI does on a node:

` + providerList() + `
The lab's provider is chosen by the first "svc add --provider" or by "up --provider"
(by default ` + defaultProviders() + `), and kept in the lab's state
(services.json) with its services. "svc add" on a Service the lab has adds backends to it:
the provider updates it in place, so its open connections keep their backends.`,
	}
	cmd.AddCommand(newSvcAddCmd(), newSvcLsCmd(), newSvcDelCmd(), newSvcStatsCmd(), newSvcConvergeCmd())
	return cmd
}

func newSvcAddCmd() *cobra.Command {
	var (
		svc, provider string
		backends      []string
	)
	cmd := &cobra.Command{
		Use:   "add LAB --service VIP:PORT[/tcp|/udp] --backend IP:PORT [--backend ...] [--provider P]",
		Short: "Add a service to a running lab, or backends to one of its services (seed 002: mustang svc add)",
		Example: `  vnetlab svc add lab --service 10.96.0.100:5201 --backend 192.168.10.10:5201
  vnetlab svc add lab --service 10.96.0.100:5201/udp --backend pod-a --provider nftables
  vnetlab svc add lab --service 10.96.0.101:80 --backend pod-a:5201 --backend pod-c:5201
  vnetlab svc add lab6 --service '[fd00:10:96::100]:5201' --backend pod-a   # a lab with IPv6 (iptables, nftables, ebpf)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			r := labservice.AddRequest{Provider: provider}
			key, err := serviceKey(svc)
			if err != nil {
				return err
			}
			r.Key = key
			for _, b := range backends {
				bs, err := labservice.ParseBackend(b)
				if err != nil {
					return err
				}
				r.Backends = append(r.Backends, bs)
			}
			res, err := labservice.Add(args[0], r)
			if err != nil {
				return err
			}
			fmt.Println(res)
			if res.NeedsEndpoints {
				fmt.Printf("no endpoints yet: attach the programs where traffic enters, e.g. `vnetlab ep add %s --pod %s`\n", res.Lab, res.ClientPod)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&svc, "service", "", "clusterIP:port or [IPv6 clusterIP]:port, optionally /tcp or /udp (tcp by default)")
	f.StringArrayVar(&backends, "backend", nil, "backend pod as IP:PORT, [IPv6]:PORT or POD:PORT (a pod name is its address of the clusterIP's family; port defaults to the service's); repeatable; none: only with "+keepsEmpty()+", whose programs refuse the Service's clients")
	f.StringVar(&provider, "provider", "", labservice.NameList()+" (only when the lab has no services yet; default "+defaultProviders()+")")
	return cmd
}

// serviceKey reads --service.
func serviceKey(svc string) (labservice.Key, error) {
	if svc == "" {
		return labservice.Key{}, fmt.Errorf("no --service given (example: --service 10.96.0.100:5201/tcp)")
	}
	return labservice.ParseKey(svc)
}

func newSvcDelCmd() *cobra.Command {
	var svc string
	cmd := &cobra.Command{
		Use:     "del LAB --service VIP:PORT[/tcp|/udp]",
		Short:   "Delete a service from a running lab (connections already open keep their conntrack NAT)",
		Example: `  vnetlab svc del lab --service 10.96.0.100:5201/tcp`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			key, err := serviceKey(svc)
			if err != nil {
				return err
			}
			return printResult(labservice.Del(args[0], key))
		},
	}
	cmd.Flags().StringVar(&svc, "service", "", "clusterIP:port or [IPv6 clusterIP]:port, optionally /tcp or /udp (tcp by default)")
	return cmd
}

// printResult prints what a change to a lab's services did.
func printResult(r labservice.Result, err error) error {
	if err == nil {
		fmt.Println(r)
	}
	return err
}

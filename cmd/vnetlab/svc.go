package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/service"
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
	cmd.AddCommand(newSvcAddCmd(), newSvcLsCmd(), newSvcDelCmd())
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
			r := service.AddRequest{Provider: provider}
			key, err := serviceKey(svc)
			if err != nil {
				return err
			}
			r.Key = key
			for _, b := range backends {
				bs, err := service.ParseBackend(b)
				if err != nil {
					return err
				}
				r.Backends = append(r.Backends, bs)
			}
			res, err := service.Add(args[0], r)
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
	f.StringVar(&provider, "provider", "", service.NameList()+" (only when the lab has no services yet; default "+defaultProviders()+")")
	return cmd
}

// serviceKey reads --service.
func serviceKey(svc string) (service.Key, error) {
	if svc == "" {
		return service.Key{}, fmt.Errorf("no --service given (example: --service 10.96.0.100:5201/tcp)")
	}
	return service.ParseKey(svc)
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
			return printResult(service.Del(args[0], key))
		},
	}
	cmd.Flags().StringVar(&svc, "service", "", "clusterIP:port or [IPv6 clusterIP]:port, optionally /tcp or /udp (tcp by default)")
	return cmd
}

// printResult prints what a change to a lab's services did.
func printResult(r service.Result, err error) error {
	if err == nil {
		fmt.Println(r)
	}
	return err
}

func newSvcLsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ls LAB",
		Short: "List a lab's services, their backends and provider (-o json for scripts)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, c, err := readServices(args[0], output)
			if err != nil {
				return err
			}
			if output == "json" {
				if c.Services == nil {
					c.Services = []service.Service{}
				}
				return printJSON(c)
			}
			printServices(os.Stdout, st, c)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// readServices loads a lab and its services for a read-only listing, after
// checking the -o value (table or json).
func readServices(name, output string) (*lab.State, *service.Config, error) {
	if output != "table" && output != "json" {
		return nil, nil, fmt.Errorf("-o %q: want table or json", output)
	}
	st, err := lab.Load(name)
	if err != nil {
		return nil, nil, err
	}
	c, err := service.Load(st.Name)
	return st, c, err
}

func printServices(w io.Writer, st *lab.State, c *service.Config) {
	if c.Provider == "" {
		vip := service.DefaultVIP + ":5201"
		if !st.Spec.Family.HasIPv4() {
			vip = "'[" + service.DefaultVIP6 + "]:5201'"
		}
		fmt.Fprintf(w, "lab %s has no services (add one: vnetlab svc add %s --service %s --backend %s)\n", st.Name, st.Name, vip, firstPodIP(st))
		return
	}
	state := "loaded"
	if !c.Installed {
		state = "not loaded"
	}
	fmt.Fprintf(w, "lab %s: provider %s (%s, last load %.2fs), %s\n", st.Name, c.Provider, state, c.LoadSeconds, c.CountText())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSERVICE\tPORT\tPROTO\tBACKENDS")
	for i, s := range c.Sorted() {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", i+1, s.VIP, s.Port, s.Proto, service.BackendList(s.Backends))
	}
	if c.Extra > 0 {
		for _, f := range c.Family.Measured() {
			first, last := service.Generated(f, 0), service.Generated(f, c.Extra-1)
			_, backends := service.GeneratedRanges(f)
			fmt.Fprintf(tw, "\t%s .. %s\t%d-%d\ttcp\t%d generated services, %d backend each in %s (never dialed)\n",
				first.VIP, last.VIP, service.GeneratedBasePort, service.GeneratedBasePort+service.GeneratedPorts-1, c.Extra, service.GeneratedBackends, backends)
		}
	}
	tw.Flush()
}

func firstPodIP(st *lab.State) string {
	if len(st.Pods) > 0 && st.Pods[0].IP != "" {
		return st.Pods[0].IP + ":5201"
	}
	if len(st.Pods) > 0 {
		return st.Pods[0].Name + ":5201" // an ipv6 lab: the pod stands for its IPv6 address
	}
	return "POD-IP:5201"
}

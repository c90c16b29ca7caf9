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
	cmd.AddCommand(newSvcAddCmd(), newSvcLsCmd(), newSvcDelCmd(), newSvcStatsCmd())
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

func newSvcStatsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "stats LAB",
		Short: "The lab's eBPF programs' counters: what they translated, refused, passed to the stack (-o json for scripts)",
		Long: `Counters of vnetlab's eBPF programs in a lab, summed over CPUs since its maps were created,
read from the pinned maps (nothing is loaded or changed):

  tc Service programs, per family: packets translated to a backend (DNAT) and back (RNAT),
    new flows, Services without backends (SYNs and datagrams refused, later packets
    dropped), ICMP errors translated, fragments, hairpins, rewrite errors; over IPv6 also
    packets passed to the stack untouched (too many extension headers, cut-off headers);
  host routing: packets redirected straight into a pod, left to the node's stack, TTL
    expired, translated packets addressed to a sibling's MAC;
  socket programs (ebpf-sock), when the lab has them: connects and datagrams translated,
    addresses restored for getpeername/recvfrom, connects refused.

A lab without eBPF programs (a netfilter provider on a mode without programs) has none.

Examples:
  vnetlab svc stats lab1
  vnetlab svc stats lab1 -o json | jq .tc.ipv6`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTableOrJSON(output); err != nil {
				return err
			}
			st, err := lab.Load(args[0])
			if err != nil {
				return err
			}
			c, err := service.ReadCounters(st.Name)
			if err != nil {
				return err
			}
			if output == "json" {
				return printJSON(c)
			}
			printCounters(os.Stdout, c)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// printCounters: the tc programs' counters by family side by side, then
// host routing's and the socket programs'.
func printCounters(w io.Writer, c service.Counters) {
	v4, v6, h := c.TC.IPv4, c.TC.IPv6, c.TC.Host
	fmt.Fprintf(w, "lab %s: eBPF counters since its maps were created\n", c.Lab)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TC SERVICE PROGRAMS\tIPV4\tIPV6")
	for _, r := range []struct {
		what     string
		ipv4, v6 any
	}{
		{"translated to a backend (DNAT)", v4.DNAT, v6.DNAT},
		{"replies translated back (RNAT)", v4.RNAT, v6.RNAT},
		{"new flows", v4.NewFlows, v6.NewFlows},
		{"no backend: refused (ICMP port unreachable)", v4.Rejects, v6.Rejects},
		{"no backend: dropped", v4.NoBackend, v6.NoBackend},
		{"ICMP errors translated", v4.ICMP, v6.ICMP},
		{"fragments translated", v4.Frags, v6.Frags},
		{"hairpin flows", v4.Hairpin, "-"},
		{"passed untouched: too many extension headers", "-", v6.ExtHdrPass},
		{"passed untouched: cut-off headers", "-", v6.TruncPass},
		{"rewrite errors (dropped)", v4.Errors, v6.Errors},
	} {
		fmt.Fprintf(tw, "  %s\t%v\t%v\n", r.what, r.ipv4, r.v6)
	}
	tw.Flush()
	fmt.Fprintf(w, "host routing: %d redirected into a pod, %d left to the node's stack, %d TTL expired, %d addressed to a sibling's MAC\n",
		h.Redirected, h.Stack, h.TTLExpired, h.L2)
	if s := c.Socket; s != nil {
		fmt.Fprintf(w, "socket programs: %d connects and %d datagrams translated, %d addresses restored, %d refused (no backend)\n",
			s.Connects, s.Sends, s.Reverse, s.NoBackend)
	}
}

// readServices loads a lab and its services for a read-only listing, after
// checking the -o value (table or json).
func readServices(name, output string) (*lab.State, *service.Config, error) {
	if err := checkTableOrJSON(output); err != nil {
		return nil, nil, err
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

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/service"
)

func init() { extraCommands = append(extraCommands, newEpCmd) }

func newEpCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ep",
		Short: "Attach, list and detach the ebpf provider's programs on pods (seed 002: mustang ep add)",
		Long: `An endpoint is a pod interface where the ebpf provider attaches its tc programs:
on the node end of the pod's veth (veth-routed, bridge, docker-nat: seed 002's veth+eBPF)
or on the pod's own interface (macvlan, ipvlan: seed 002's ipvlan+eBPF). iptables and
nftables need no endpoints: their rules in the node see every pod's traffic.
"up --provider ebpf" attaches every pod; "svc add --provider ebpf" leaves it to "ep add".`,
	}
	cmd.AddCommand(newEpAddCmd(), newEpLsCmd(), newEpDelCmd())
	return cmd
}

type epFlags struct {
	pod, ifname, netns, placement string
}

func (f *epFlags) register(cmd *cobra.Command, withPlacement bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.pod, "pod", "", "pod name (pod-a)")
	fl.StringVar(&f.ifname, "ifname", "", "interface inside the pod (with --netns)")
	fl.StringVar(&f.netns, "netns", "", "pod namespace: a path (/var/run/netns/NAME) or a name")
	if withPlacement {
		fl.StringVar(&f.placement, "placement", "", "pod, node or routed (default: by mode; node for veth modes, routed for veth-ebpf, pod for macvlan/ipvlan/macvlan-ebpf)")
	}
}

// check validates the flag combination before the lab is touched.
func (f *epFlags) check() error {
	if f.pod == "" && f.netns == "" {
		return fmt.Errorf("say which pod: --pod pod-a, or --ifname eth0 --netns /var/run/netns/NAME")
	}
	if f.pod != "" && f.netns != "" {
		return fmt.Errorf("--pod and --netns both name a pod: give one of them")
	}
	if f.netns != "" && f.ifname == "" {
		return fmt.Errorf("--netns needs --ifname (the pod's interface, e.g. eth0)")
	}
	if f.placement != "" && f.placement != service.PlacementPod && f.placement != service.PlacementNode && f.placement != service.PlacementRouted {
		return fmt.Errorf("--placement %q: want pod or node, or routed (veth-ebpf host routing)", f.placement)
	}
	return nil
}

// resolve finds the pod the flags name; only the lab's own pods qualify.
func (f *epFlags) resolve(st *lab.State) (service.Endpoint, error) {
	var pod *lab.PodState
	for i := range st.Pods {
		p := &st.Pods[i]
		if f.pod != "" && p.Name == f.pod {
			pod = p
		}
		if f.netns != "" && (filepath.Base(f.netns) == p.NS || f.netns == p.NS) {
			pod = p
		}
	}
	if pod == nil {
		what := "pod " + f.pod
		if f.netns != "" {
			what = "namespace " + f.netns
		}
		var have []string
		for _, p := range st.Pods {
			have = append(have, fmt.Sprintf("%s (%s)", p.Name, filepath.Join("/var/run/netns", p.NS)))
		}
		return service.Endpoint{}, fmt.Errorf("%s is not a pod of lab %s (pods: %s)", what, st.Name, strings.Join(have, ", "))
	}
	if f.ifname != "" && f.ifname != pod.Ifname {
		return service.Endpoint{}, fmt.Errorf("pod %s has no interface %q (its interface is %s)", pod.Name, f.ifname, pod.Ifname)
	}
	pl := f.placement
	if pl == "" {
		pl = service.PlacementFor(st.Mode)
	}
	return service.Endpoint{Pod: pod.Name, NS: pod.NS, Ifname: pod.Ifname, Placement: pl}, nil
}

func newEpAddCmd() *cobra.Command {
	var f epFlags
	cmd := &cobra.Command{
		Use:   "add LAB --pod POD | --ifname IF --netns PATH",
		Short: "Attach the ebpf provider's programs for a pod",
		Example: `  vnetlab ep add lab --pod pod-b
  vnetlab ep add lab --ifname eth0 --netns /var/run/netns/vnl-lab-pod-a`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			if err := f.check(); err != nil {
				return err
			}
			return withServices(args[0], func(st *lab.State, c *service.Config) (string, error) {
				if c.Provider != "" && c.Provider != "ebpf" {
					return "", fmt.Errorf("lab %s's services use %s, which needs no endpoints (its rules in the node see every pod's traffic); endpoints are for --provider ebpf", st.Name, c.Provider)
				}
				if err := chooseProvider(st, c, "ebpf"); err != nil {
					return "", err
				}
				ep, err := f.resolve(st)
				if err != nil {
					return "", err
				}
				for _, e := range c.Endpoints {
					if e.NS == ep.NS && e.Ifname == ep.Ifname {
						return "", fmt.Errorf("endpoint %s/%s (pod %s) is already attached", ep.NS, ep.Ifname, ep.Pod)
					}
				}
				c.Endpoints = append(c.Endpoints, ep)
				return fmt.Sprintf("endpoint %s (%s in %s, placement %s) attached", ep.Pod, ep.Ifname, ep.NS, ep.Placement), nil
			})
		},
	}
	f.register(cmd, true)
	return cmd
}

func newEpDelCmd() *cobra.Command {
	var f epFlags
	cmd := &cobra.Command{
		Use:     "del LAB --pod POD | --ifname IF --netns PATH",
		Short:   "Detach the ebpf provider's programs from a pod",
		Example: `  vnetlab ep del lab --pod pod-b`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			if err := f.check(); err != nil {
				return err
			}
			return withServices(args[0], func(st *lab.State, c *service.Config) (string, error) {
				ep, err := f.resolve(st)
				if err != nil {
					return "", err
				}
				for i, e := range c.Endpoints {
					if e.NS == ep.NS && e.Ifname == ep.Ifname {
						c.Endpoints = append(c.Endpoints[:i], c.Endpoints[i+1:]...)
						return fmt.Sprintf("endpoint %s detached", ep.Pod), nil
					}
				}
				return "", fmt.Errorf("pod %s has no endpoint (see `vnetlab ep ls %s`)", ep.Pod, st.Name)
			})
		},
	}
	f.register(cmd, false)
	return cmd
}

func newEpLsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ls LAB",
		Short: "List the pods the ebpf provider's programs are attached to",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, c, err := readServices(args[0], output)
			if err != nil {
				return err
			}
			eps := c.Endpoints
			if eps == nil {
				eps = []service.Endpoint{}
			}
			if output == "json" {
				return printJSON(eps)
			}
			fmt.Printf("lab %s: provider %s, %d endpoints\n", st.Name, orNone(c.Provider), len(eps))
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tPOD\tIP\tIFNAME\tNETNS\tPLACEMENT")
			for i, e := range eps {
				ip := ""
				for _, p := range st.Pods {
					if p.NS == e.NS {
						ip = p.IP
					}
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, e.Pod, ip, e.Ifname, filepath.Join("/var/run/netns", e.NS), e.Placement)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

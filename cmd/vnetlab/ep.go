package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
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

func registerPodRef(cmd *cobra.Command, r *labservice.PodRef, withPlacement bool) {
	fl := cmd.Flags()
	fl.StringVar(&r.Pod, "pod", "", "pod name (pod-a)")
	fl.StringVar(&r.Ifname, "ifname", "", "interface inside the pod (with --netns)")
	fl.StringVar(&r.NetNS, "netns", "", "pod namespace: a path (/var/run/netns/NAME) or a name")
	if withPlacement {
		fl.StringVar(&r.Placement, "placement", "", "pod, node or routed (default: by mode; node for veth modes, routed for veth-ebpf, pod for macvlan/ipvlan/macvlan-ebpf)")
	}
}

func newEpAddCmd() *cobra.Command {
	var r labservice.PodRef
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
			return printResult(labservice.Attach(args[0], r))
		},
	}
	registerPodRef(cmd, &r, true)
	return cmd
}

func newEpDelCmd() *cobra.Command {
	var r labservice.PodRef
	cmd := &cobra.Command{
		Use:     "del LAB --pod POD | --ifname IF --netns PATH",
		Short:   "Detach the ebpf provider's programs from a pod",
		Example: `  vnetlab ep del lab --pod pod-b`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			return printResult(labservice.Detach(args[0], r))
		},
	}
	registerPodRef(cmd, &r, false)
	return cmd
}

func newEpLsCmd() *cobra.Command {
	return showLabCmd(&cobra.Command{
		Use:   "ls LAB",
		Short: "List the pods the ebpf provider's programs are attached to",
		Example: `  vnetlab ep ls lab
  vnetlab ep ls lab -o json`,
	}, readEndpoints, printEndpoints)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// endpoints is ep ls's view of a lab's services: the provider (for the
// table) and the pods carrying its programs, which are what -o json prints.
type endpoints struct {
	provider string
	list     []labservice.Endpoint
}

func (e endpoints) MarshalJSON() ([]byte, error) { return json.Marshal(e.list) }

func readEndpoints(st *lab.State) (endpoints, error) {
	c, err := labservice.Load(st.Name)
	if err != nil {
		return endpoints{}, err
	}
	e := endpoints{provider: c.Provider, list: c.Endpoints}
	if e.list == nil {
		e.list = []labservice.Endpoint{}
	}
	return e, nil
}

func printEndpoints(w io.Writer, st *lab.State, e endpoints) {
	fmt.Fprintf(w, "lab %s: provider %s, %d endpoints\n", st.Name, orNone(e.provider), len(e.list))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPOD\tIP\tIFNAME\tNETNS\tPLACEMENT")
	for i, ep := range e.list {
		ip := ""
		for _, p := range st.Pods {
			if p.NS == ep.NS {
				ip = p.IP
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, ep.Pod, ip, ep.Ifname, filepath.Join("/var/run/netns", ep.NS), ep.Placement)
	}
	tw.Flush()
}

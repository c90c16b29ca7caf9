package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
)

func newSvcLsCmd() *cobra.Command {
	return showLabCmd(&cobra.Command{
		Use:   "ls LAB",
		Short: "List a lab's services, their backends and provider (-o json for scripts)",
		Example: `  vnetlab svc ls lab
  vnetlab svc ls lab -o json`,
	}, readServices, printServices)
}

// readServices reads a lab's services for a listing (none: an empty list
// in JSON, not null).
func readServices(st *lab.State) (*labservice.Config, error) {
	c, err := labservice.Load(st.Name)
	if err == nil && c.Services == nil {
		c.Services = []labservice.Service{}
	}
	return c, err
}

func printServices(w io.Writer, st *lab.State, c *labservice.Config) {
	if c.Provider == "" {
		vip := labservice.DefaultVIP + ":5201"
		if !st.Spec.Family.HasIPv4() {
			vip = "'[" + labservice.DefaultVIP6 + "]:5201'"
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
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", i+1, s.VIP, s.Port, s.Proto, labservice.BackendList(s.Backends))
	}
	if c.Extra > 0 {
		for _, f := range c.Family.Measured() {
			first, last := labservice.Generated(f, 0), labservice.Generated(f, c.Extra-1)
			_, backends := labservice.GeneratedRanges(f)
			fmt.Fprintf(tw, "\t%s .. %s\t%d-%d\ttcp\t%d generated services, %d backend each in %s (never dialed)\n",
				first.VIP, last.VIP, labservice.GeneratedBasePort, labservice.GeneratedBasePort+labservice.GeneratedPorts-1, c.Extra, labservice.GeneratedBackends, backends)
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

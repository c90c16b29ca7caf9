package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
)

func newSvcStatsCmd() *cobra.Command {
	return showLabCmd(&cobra.Command{
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

A lab without eBPF programs (a netfilter provider on a mode without programs) has none.`,
		Example: `  vnetlab svc stats lab1
  vnetlab svc stats lab1 -o json | jq .tc.ipv6`,
	}, func(st *lab.State) (labservice.Counters, error) { return labservice.ReadCounters(st.Name) }, printCounters)
}

// printCounters: the tc programs' counters by family side by side, then
// host routing's and the socket programs'.
func printCounters(w io.Writer, _ *lab.State, c labservice.Counters) {
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

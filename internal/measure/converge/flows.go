package converge

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// The probers' own flows in conntrack. Every probe is a UDP flow of its own
// (probe.go), so with the kernel's UDP timeout (30 s) a prober sending a
// probe a millisecond to two targets keeps some 60,000 entries on its node
// and on the backends' nodes. A proxy that lists conntrack when it syncs
// pays for them: kube-proxy's conntrack reconciler took 816 of node1's 875
// sync seconds in a run of 1,000 changes here (docs/kubernetes-converge.md), so the
// harness slowed the proxies it compares, and some more than others.
//
// FlowTable gives the probers' UDP flows a conntrack timeout of their own
// on each node: a ct timeout policy set on every UDP packet from a
// prober's address, in a prerouting chain after conntrack (priority
// filter: the kernel sets a policy on a new, unconfirmed entry, not on
// the template a raw chain sees). A probe's 5-tuple is not used again
// within ReuseAfter, and its answer comes within its ProbeTimeout, so its
// entry is of no use after that. The workload's own flows keep the
// kernel's timeouts. kube converge gives it on a local cluster's nodes (a lab's
// providers never list conntrack).
const (
	FlowTable = "vnetlab_probe"
	// DefaultFlowTimeout is the probers' flows' timeout: the shortest nft
	// takes (whole seconds), ten times the default ProbeTimeout.
	DefaultFlowTimeout = time.Second
)

// FlowScript is the table giving the UDP flows of probers (their
// addresses) the conntrack timeout t (in whole seconds, rounded up), in
// one transaction replacing any FlowTable before it.
func FlowScript(probers []netip.Addr, t time.Duration) string {
	var b strings.Builder
	b.WriteString(proc.NftDropTable("inet " + FlowTable))
	fmt.Fprintf(&b, "table inet %s {\n", FlowTable)
	s := int(max(t+time.Second-1, time.Second) / time.Second) // whole seconds, rounded up
	var rules []string
	for _, family := range []string{"ip", "ip6"} { // nft's word for the family, in a match and a policy alike
		var addrs []string
		for _, a := range probers {
			if a.Unmap().Is4() == (family == "ip") {
				addrs = append(addrs, a.Unmap().String())
			}
		}
		if len(addrs) == 0 {
			continue
		}
		name := "udp-" + family
		fmt.Fprintf(&b, "\tct timeout %s { protocol udp; l3proto %s; policy = { unreplied: %d, replied: %d }; }\n", name, family, s, s)
		rules = append(rules, fmt.Sprintf("\t\t%s saddr { %s } meta l4proto udp ct timeout set %q\n", family, strings.Join(addrs, ", "), name))
	}
	b.WriteString("\tchain probes {\n\t\ttype filter hook prerouting priority filter; policy accept;\n")
	for _, r := range rules {
		b.WriteString(r)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// LimitFlows loads FlowScript(probers, t) into each namespace of nodes
// that tracks flows (its nf_conntrack_count above 0: a cluster's node
// always holds its kubelet's and API server's; the table's ct timeout
// would make one that tracks nothing start tracking, a cost the proxy
// under measure never had). The undo it returns removes the tables again
// (a failure undoes those loaded before it itself).
func LimitFlows(nodes []string, probers []netip.Addr, t time.Duration) (undo func() error, err error) {
	if len(probers) == 0 {
		return nil, errors.New("no prober addresses to give a conntrack timeout")
	}
	var done []string
	undo = func() error {
		var errs []error
		for _, ns := range done {
			errs = append(errs, proc.Nft(ns, proc.NftDropTable("inet "+FlowTable)))
		}
		return errors.Join(errs...)
	}
	script := FlowScript(probers, t)
	for _, ns := range nodes {
		if n, err := ConntrackEntries(ns); err != nil || n == 0 {
			continue
		}
		if err := proc.Nft(ns, script); err != nil {
			return nil, errors.Join(err, undo())
		}
		done = append(done, ns)
	}
	return undo, nil
}

// ConntrackEntries is namespace ns's conntrack entries now (its
// nf_conntrack_count: expired ones the kernel has not yet collected
// included).
func ConntrackEntries(ns string) (int64, error) {
	v, err := nsutil.ReadSysctl(ns, "net.netfilter.nf_conntrack_count")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

// Seconds is t in whole seconds, as a result records a flow timeout.
func Seconds(t time.Duration) int { return int(t / time.Second) }

// Package polnft writes compiled NetworkPolicy rules (netpol.Rules) into a
// network namespace's nftables, in the shape of SIG Network's
// kube-network-policies: one table inet vnetlab-netpol whose base chain
// filter-forward (hook forward, priority filter: after the Service DNAT of
// prerouting or of a tc program, so it sees pod addresses) accepts
// conntrack's established and related packets first (replies of allowed
// connections, and every later packet of them) and IPv6 neighbour discovery
// (as kube-network-policies does), then looks the source up in the verdict
// maps egress-v4 / egress-v6 (a pod isolated for egress: jump to its egress
// chain, which returns when a rule allows and drops otherwise) and the
// destination in ingress-v4 / ingress-v6 (a pod isolated for ingress: goto
// its ingress chain, which accepts when a rule allows and drops otherwise).
// A pod in neither map is not isolated: its packets pass with two hash
// lookups. Each compiled Allow is a rule per family matching its peers (an
// anonymous set of pod addresses, or an ipBlock with its excepts as a set)
// and its ports (a set of `l4proto . port` intervals).
// kube-network-policies decides the first packet of a connection in
// userspace through nfqueue; this kernel has no nftables queue statement,
// so the decision is written out as sets and verdict maps instead (as its
// own maps of pod addresses gate what it queues).
//
// Load writes the whole table in one nft transaction (add, delete, add:
// atomic, so packets see the old rules or the new ones; established
// connections keep flowing through the conntrack rule). A lab's nftables
// policy provider (internal/platform/labpolicy) loads it into every node of
// a lab; a cluster node's policy controller (internal/kube/netpolicy) into
// its own namespace, with the rules of its own pods.
package polnft

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Table is the table the rules live in, in each namespace.
const Table = "vnetlab-netpol"

// The base chain and the verdict maps of the table.
const (
	baseChain = "filter-forward"
	ingress   = "ingress"
	egress    = "egress"
)

// The comments of the counters each pod chain starts with (a packet decided
// by policy) and ends with (a packet dropped), for whoever reads them back.
const (
	Evaluated = "evaluated"
	Denied    = "denied"
)

// Load replaces the table in namespace ns ("": the caller's) with the one
// script (Script) describes, in one nft transaction.
func Load(ns, script string) error { return proc.Nft(ns, script) }

// Remove deletes the table from namespace ns (none there: nothing to do).
func Remove(ns string) error { return Load(ns, proc.NftDropTable("inet "+Table)) }

// family is one address family's words in nft.
type family struct {
	match, addrType, suffix string
	is4                     bool
}

var families = []family{{"ip", "ipv4_addr", "-v4", true}, {"ip6", "ipv6_addr", "-v6", false}}

func (f family) has(a netip.Addr) bool { return a.Is4() == f.is4 }

// Script is the whole table for r, replacing any table there.
func Script(r *netpol.Rules) string {
	var b strings.Builder
	t := "inet " + Table
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	b.WriteString(proc.NftDropTable(t))
	line("add table %s { comment \"NetworkPolicy (vnetlab)\" ; }", t)
	for _, dir := range []string{egress, ingress} {
		for _, f := range families {
			line("add map %s %s%s { type %s : verdict ; }", t, dir, f.suffix, f.addrType)
		}
	}
	line("add chain %s %s { type filter hook forward priority filter ; policy accept ; }", t, baseChain)
	line("add rule %s %s ct state established,related accept", t, baseChain)
	// Neighbour discovery is no connection of a pod's: a bridge hands it
	// to netfilter (bridge-nf-call-ip6tables) and conntrack does not track
	// it, so without this an isolated pod could not resolve its peers.
	line("add rule %s %s icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept", t, baseChain)
	for _, f := range families {
		line("add rule %s %s %s saddr vmap @%s%s", t, baseChain, f.match, egress, f.suffix)
	}
	for _, f := range families {
		line("add rule %s %s %s daddr vmap @%s%s", t, baseChain, f.match, ingress, f.suffix)
	}
	for _, p := range r.Pods {
		sides := []struct {
			dir, peer, verdict, enter string
			side                      netpol.Side
		}{
			{egress, "daddr", "return", "jump", p.Egress},
			{ingress, "saddr", "accept", "goto", p.Ingress},
		}
		for _, s := range sides {
			if !s.side.Isolated {
				continue
			}
			chain := s.dir + "-" + p.Namespace + "/" + p.Pod
			line("add chain %s %s", t, chain)
			line("add rule %s %s counter comment %q", t, chain, Evaluated)
			// A pod reaching its own address is always allowed (the
			// model's rule): in a lab the packet never leaves the pod; in a
			// cluster kube-proxy's hairpin (a pod through its own Service)
			// crosses the forward hook with the pod's address both ways,
			// its masquerade after. vnetlab's eBPF proxy sends a hairpin
			// straight back into the pod, past this table (bpf/lb.h).
			for _, f := range families {
				var own []string
				for _, ip := range p.IPs {
					if f.has(ip) {
						own = append(own, ip.String())
					}
				}
				if len(own) > 0 {
					line("add rule %s %s %s %s { %s } %s", t, chain, f.match, s.peer, strings.Join(own, ", "), s.verdict)
				}
			}
			for _, a := range s.side.Allow {
				for _, m := range allow(a, s.peer) {
					line("add rule %s %s %s%s", t, chain, m, s.verdict)
				}
			}
			line("add rule %s %s counter drop comment %q", t, chain, Denied)
			for _, f := range families {
				var el []string
				for _, ip := range p.IPs {
					if f.has(ip) {
						el = append(el, ip.String()+" : "+s.enter+" "+chain)
					}
				}
				if len(el) > 0 {
					line("add element %s %s%s { %s }", t, s.dir, f.suffix, strings.Join(el, ", "))
				}
			}
		}
	}
	return b.String()
}

// allow is the matches (each ending in a space) of one compiled Allow: one
// per family for its pod addresses and one per ipBlock, or one for any
// peer; peer is "saddr" (ingress) or "daddr" (egress).
func allow(a netpol.Allow, peer string) []string {
	ports := ""
	if !a.AnyPort {
		var el []string
		for _, r := range a.Ports {
			if r.First == r.Last {
				el = append(el, fmt.Sprintf("%s . %d", r.Proto.Lower(), r.First))
			} else {
				el = append(el, fmt.Sprintf("%s . %d-%d", r.Proto.Lower(), r.First, r.Last))
			}
		}
		ports = "meta l4proto . th dport { " + strings.Join(el, ", ") + " } "
	}
	if a.AnyPeer {
		return []string{ports}
	}
	var out []string
	for _, f := range families {
		var addrs []string
		for _, ip := range a.Pods {
			if f.has(ip) {
				addrs = append(addrs, ip.String())
			}
		}
		if len(addrs) > 0 {
			out = append(out, fmt.Sprintf("%s %s { %s } %s", f.match, peer, strings.Join(addrs, ", "), ports))
		}
		for _, blk := range a.Blocks {
			if !f.has(blk.CIDR.Addr()) {
				continue
			}
			m := fmt.Sprintf("%s %s %s ", f.match, peer, blk.CIDR)
			if len(blk.Except) > 0 {
				var ex []string
				for _, e := range blk.Except {
					ex = append(ex, e.String())
				}
				m += fmt.Sprintf("%s %s != { %s } ", f.match, peer, strings.Join(ex, ", "))
			}
			out = append(out, m+ports)
		}
	}
	return out
}

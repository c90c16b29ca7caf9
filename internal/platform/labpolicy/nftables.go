package labpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// nftables: the shape of SIG Network's kube-network-policies, in every
// node's namespace: one table inet vnetlab-netpol whose base chain
// filter-forward (hook forward, priority filter: after the Service DNAT of
// prerouting, so it sees pod addresses) accepts conntrack's established and
// related packets first (replies of allowed connections, and every later
// packet of them) and IPv6 neighbour discovery (as kube-network-policies
// does), then looks the source up in the verdict maps egress-v4 /
// egress-v6 (a pod isolated for egress: jump to its egress chain, which
// returns when a rule allows and drops otherwise) and the destination in
// ingress-v4 / ingress-v6 (a pod isolated for ingress: goto its ingress
// chain, which accepts when a rule allows and drops otherwise). A pod in
// neither map is not isolated: its packets pass with two hash lookups.
// Each compiled Allow is a rule per family matching its peers (an
// anonymous set of pod addresses, or an ipBlock with its excepts as a
// set) and its ports (a set of `l4proto . port` intervals).
// kube-network-policies decides the first packet of a connection in
// userspace through nfqueue; this kernel has no nftables queue statement,
// so the decision is written out as sets and verdict maps instead (as
// its own maps of pod addresses gate what it queues).
//
// Install and every Update write the whole table in one nft transaction
// (add, delete, add: atomic, so packets see the old rules or the new ones;
// established connections keep flowing through the conntrack rule).
type nftablesProvider struct{}

func init() { Register(nftablesProvider{}) }

// NftTable is the table the nftables policy provider owns in each node.
const NftTable = "vnetlab-netpol"

// The base chain and the verdict maps of the table.
const (
	nftBaseChain = "filter-forward"
	nftIngress   = "ingress"
	nftEgress    = "egress"
	// The comments of the counters each pod chain starts with (a packet
	// decided by policy) and ends with (a packet dropped): Prove reads them.
	nftEvaluated = "evaluated"
	nftDenied    = "denied"
)

func (nftablesProvider) Info() Info {
	return Info{Name: NFTables, Summary: "kube-network-policies' shape: table inet vnetlab-netpol in each node, conntrack established first, verdict maps of isolated pods' addresses to per-pod chains of sets"}
}

func (nftablesProvider) Supports(m modes.Mode, options map[string]string) string {
	return nodeFilterSupports(m, options)
}

func (nftablesProvider) Install(st *lab.State, r *netpol.Rules) error {
	script := nftPolicyScript(r)
	return st.EachNode(func(ns string) error { return nftLoad(ns, script) })
}

func (p nftablesProvider) Update(st *lab.State, _, r *netpol.Rules) error { return p.Install(st, r) }

func (nftablesProvider) Remove(st *lab.State) error {
	return st.EachNode(func(ns string) error {
		// "add" first: deleting a table that does not exist is an error.
		return nftLoad(ns, fmt.Sprintf("add table inet %s\ndelete table inet %s\n", NftTable, NftTable))
	})
}

func nftLoad(ns, script string) error {
	c := proc.Command(context.Background(), ns, "nft", "-f", "-")
	c.Stdin = bytes.NewBufferString(script)
	if _, err := c.Output(); err != nil {
		return fmt.Errorf("nft -f in %s: %w", ns, err)
	}
	return nil
}

// nftFamily is one address family's words in nft.
type nftFamily struct {
	match, addrType, suffix string
	is4                     bool
}

var nftFamilies = []nftFamily{{"ip", "ipv4_addr", "-v4", true}, {"ip6", "ipv6_addr", "-v6", false}}

func (f nftFamily) has(a netip.Addr) bool { return a.Is4() == f.is4 }

// nftPolicyScript is the whole table for r, replacing any table there.
func nftPolicyScript(r *netpol.Rules) string {
	var b strings.Builder
	t := "inet " + NftTable
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	line("add table %s", t)
	line("delete table %s", t)
	line("add table %s { comment \"NetworkPolicy (vnetlab)\" ; }", t)
	for _, dir := range []string{nftEgress, nftIngress} {
		for _, f := range nftFamilies {
			line("add map %s %s%s { type %s : verdict ; }", t, dir, f.suffix, f.addrType)
		}
	}
	line("add chain %s %s { type filter hook forward priority filter ; policy accept ; }", t, nftBaseChain)
	line("add rule %s %s ct state established,related accept", t, nftBaseChain)
	// Neighbour discovery is no connection of a pod's: a bridge hands it
	// to netfilter (bridge-nf-call-ip6tables) and conntrack does not track
	// it, so without this an isolated pod could not resolve its peers.
	line("add rule %s %s icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept", t, nftBaseChain)
	for _, f := range nftFamilies {
		line("add rule %s %s %s saddr vmap @%s%s", t, nftBaseChain, f.match, nftEgress, f.suffix)
	}
	for _, f := range nftFamilies {
		line("add rule %s %s %s daddr vmap @%s%s", t, nftBaseChain, f.match, nftIngress, f.suffix)
	}
	for _, p := range r.Pods {
		sides := []struct {
			dir, peer, verdict, enter string
			side                      netpol.Side
		}{
			{nftEgress, "daddr", "return", "jump", p.Egress},
			{nftIngress, "saddr", "accept", "goto", p.Ingress},
		}
		for _, s := range sides {
			if !s.side.Isolated {
				continue
			}
			chain := s.dir + "-" + p.Namespace + "/" + p.Pod
			line("add chain %s %s", t, chain)
			line("add rule %s %s counter comment %q", t, chain, nftEvaluated)
			for _, a := range s.side.Allow {
				for _, m := range nftAllow(a, s.peer) {
					line("add rule %s %s %s%s", t, chain, m, s.verdict)
				}
			}
			line("add rule %s %s counter drop comment %q", t, chain, nftDenied)
			for _, f := range nftFamilies {
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

// nftAllow is the matches (each ending in a space) of one compiled Allow:
// one per family for its pod addresses and one per ipBlock, or one for any
// peer; peer is "saddr" (ingress) or "daddr" (egress).
func nftAllow(a netpol.Allow, peer string) []string {
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
	for _, f := range nftFamilies {
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

// Prove reads the table back from every node (nft -j list table): its
// rules and its maps' elements against what the lab's compiled policies
// make, and the pod chains' counters.
func (nftablesProvider) Prove(st *lab.State) (Proof, error) {
	r, err := SavedRules(st)
	if err != nil {
		return Proof{}, err
	}
	per := nftObjects(nftPolicyScript(r))
	var p Proof
	err = st.EachNode(func(ns string) error {
		p.Want += per
		out, err := proc.Command(context.Background(), ns, "nft", "-j", "list", "table", "inet", NftTable).Output()
		if err != nil {
			return fmt.Errorf("nft list table in %s: %w", ns, err)
		}
		return nftReadBack(out, &p)
	})
	return p, err
}

// nftObjects counts a script's rules and map elements.
func nftObjects(script string) int {
	n := 0
	for _, l := range strings.Split(script, "\n") {
		switch {
		case strings.HasPrefix(l, "add rule "):
			n++
		case strings.HasPrefix(l, "add element "):
			n += strings.Count(l, ",") + 1
		}
	}
	return n
}

// nftReadBack adds what nft's JSON listing of the table holds to p: each
// rule and each element of its maps, and the counters of the rules
// commented nftEvaluated and nftDenied.
func nftReadBack(listing []byte, p *Proof) error {
	var doc struct {
		Nftables []struct {
			Map *struct {
				Elem []json.RawMessage `json:"elem"`
			} `json:"map"`
			Rule *struct {
				Comment string `json:"comment"`
				Expr    []struct {
					Counter *struct {
						Packets uint64 `json:"packets"`
					} `json:"counter"`
				} `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(listing, &doc); err != nil {
		return fmt.Errorf("nft's JSON listing: %v", err)
	}
	for _, o := range doc.Nftables {
		if o.Map != nil {
			p.Objects += len(o.Map.Elem)
		}
		if o.Rule == nil {
			continue
		}
		p.Objects++
		for _, e := range o.Rule.Expr {
			if e.Counter == nil {
				continue
			}
			switch o.Rule.Comment {
			case nftEvaluated:
				p.Evaluated += e.Counter.Packets
			case nftDenied:
				p.Denied += e.Counter.Packets
			}
		}
	}
	return nil
}

// Package polnft writes compiled NetworkPolicy rules (netpol.Rules) into a
// network namespace's nftables, in the shape of SIG Network's
// kube-network-policies: one table inet vnetlab-netpol whose base chain
// filter-forward (hook forward, priority filter: after the Service DNAT of
// prerouting or of a tc program, so it sees pod addresses) accepts
// conntrack's established and related packets first (replies of allowed
// connections, and every later packet of them) and IPv6 neighbour discovery
// (as kube-network-policies does), then looks the source up in the verdict
// maps egress-v4 / egress-v6 (a pod isolated for egress: goto its egress
// chain) and goes to the chain filter-ingress, which looks the destination
// up in ingress-v4 / ingress-v6 (a pod isolated for ingress: goto its
// ingress chain) and accepts the rest. A pod in neither map is not
// isolated: its packets pass with two hash lookups.
//
// A pod chain (egress-NS/POD, ingress-NS/POD) counts the packet in its
// named counter CHAIN/evaluated, lets the pod's own addresses through,
// jumps to each of its bucket chains (CHAIN/N) in turn, and counts the
// packet in CHAIN/denied and drops it. The pod's Allows of that direction
// are spread over Buckets bucket chains by their hash (netpol.Allow.Hash),
// in order within a bucket; a chain holds only its non-empty buckets.
// Every rule of a bucket only allows (ingress: accept; egress: goto
// filter-ingress, where the destination decides), so the order the pod
// chain walks them in does not change what it decides. Each Allow is a
// rule per family matching its peers (an anonymous set of pod addresses,
// or an ipBlock with its excepts as a set) and its ports (a set of
// `l4proto . port` intervals).
//
// Script is the whole table, which Load writes in one nft transaction
// (add, delete, add: atomic, so packets see the old rules or the new ones;
// established connections keep flowing through the conntrack rule). Delta
// is one transaction that turns the table of some rules into the table of
// others, writing only what differs: of a changed pod, the bucket chains
// whose Allows changed are refilled, its pod chain is rewritten only when
// its buckets or its addresses changed, its map elements are added or
// deleted only where its isolation or its addresses changed. A change that
// carries the Allows that came and went (a netpol.Compiler's Changes) and
// keeps the pod's buckets is written by them alone: Allows added append
// their rules to their buckets (a policy added to 10,000 that select one
// pod: one rule), Allows taken refill their buckets from the Allows now.
// Apply writes changes: when they only take Allows from buckets that keep
// one and add Allows to buckets a pod has, it writes them through netlink
// instead (edit.go): a taken Allow's rules deleted by handle, each found
// by its comment (the hash of its text, which every Allow's rule carries),
// an added one's appended as the expressions nft makes of the same text
// (exprs.go); it loads the Delta otherwise.
// The counters are named objects, so rewriting a pod chain keeps them: a
// pod's counts only grow while it stays isolated. Script is Delta from no
// rules behind the table's frame, so the two make the same ruleset, but
// for the order of a bucket's rules (which only allow: any order decides
// alike).
//
// kube-network-policies decides the first packet of a connection in
// userspace through nfqueue; this kernel has no nftables queue statement,
// so the decision is written out as sets and verdict maps instead (as its
// own maps of pod addresses gate what it queues). A lab's nftables policy
// provider (internal/platform/labpolicy) loads the table into every node of
// a lab; a cluster node's policy controller (internal/kube/netpolicy) into
// its own namespace, with the rules of its own pods.
package polnft

import (
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables/expr"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Table is the table the rules live in, in each namespace.
const Table = "vnetlab-netpol"

// table is the table as nft's commands name it.
const table = "inet " + Table

// The base chain, the chain deciding a destination's ingress, and the
// directions (the verdict maps' and the pod chains' prefixes).
const (
	baseChain = "filter-forward"
	toIngress = "filter-ingress"
	ingress   = "ingress"
	egress    = "egress"
)

// The endings of the names of the counters each pod chain starts with (a
// packet decided by policy: CHAIN/evaluated) and ends with (a packet
// dropped: CHAIN/denied), for whoever reads them back.
const (
	Evaluated = "evaluated"
	Denied    = "denied"
)

// Buckets is how many bucket chains a pod's Allows of one direction are
// spread over. More buckets make a bucket smaller (what one changed Allow
// rewrites) and the pod chain longer (a jump per non-empty bucket, which
// every packet the pod's rules decide walks).
const Buckets = 256

// Load runs script (Script, Delta) in namespace ns ("": the caller's), in
// one nft transaction.
func Load(ns, script string) error { return proc.Nft(ns, script) }

// change makes the table in namespace ns hold rules r, from the table of
// the rules a Delta (delta) starts from: it loads the delta, and if nft
// refuses it (the table there is not the one the delta starts from), the
// whole table (Script(r)) once. An empty delta is nothing to do.
func change(ns, delta string, r *netpol.Rules) error {
	if delta == "" {
		return nil
	}
	err := Load(ns, delta)
	if err == nil {
		return nil
	}
	if err2 := Load(ns, Script(r)); err2 != nil {
		return fmt.Errorf("loading the changes: %v; loading the whole table instead: %v", err, err2)
	}
	return nil
}

// Remove deletes the table from namespace ns (none there: nothing to do).
func Remove(ns string) error { return Load(ns, proc.NftDropTable(table)) }

// family is one address family's words in nft.
type family struct {
	match, addrType, suffix string
	is4                     bool
}

var families = []family{{"ip", "ipv4_addr", "-v4", true}, {"ip6", "ipv6_addr", "-v6", false}}

func (f family) has(a netip.Addr) bool { return a.Is4() == f.is4 }

// of is the addresses of family f among ips.
func (f family) of(ips []netip.Addr) []string {
	var out []string
	for _, ip := range ips {
		if f.has(ip) {
			out = append(out, ip.String())
		}
	}
	return out
}

// script is nft commands being written.
type script struct{ strings.Builder }

// line writes one command on the table: format's first verb is the table.
func (s *script) line(format string, args ...any) {
	fmt.Fprintf(s, format, append([]any{table}, args...)...)
	s.WriteByte('\n')
}

// Script is the whole table for r, replacing any table there.
func Script(r *netpol.Rules) string { return scriptOf(r, Buckets) }

// scriptOf is Script with nb buckets a pod side.
func scriptOf(r *netpol.Rules, nb uint64) string {
	var s script
	s.WriteString(proc.NftDropTable(table))
	s.line("add table %s { comment \"NetworkPolicy (vnetlab)\" ; }")
	for _, d := range directions {
		for _, f := range families {
			s.line("add map %s %s%s { type %s : verdict ; }", d.name, f.suffix, f.addrType)
		}
	}
	s.line("add chain %s %s", toIngress)
	for _, f := range families {
		s.line("add rule %s %s %s daddr vmap @%s%s", toIngress, f.match, ingress, f.suffix)
	}
	s.line("add rule %s %s accept", toIngress)
	s.line("add chain %s %s { type filter hook forward priority filter ; policy accept ; }", baseChain)
	s.line("add rule %s %s ct state established,related accept", baseChain)
	// Neighbour discovery is no connection of a pod's: a bridge hands it
	// to netfilter (bridge-nf-call-ip6tables) and conntrack does not track
	// it, so without this an isolated pod could not resolve its peers.
	s.line("add rule %s %s icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept", baseChain)
	for _, f := range families {
		s.line("add rule %s %s %s saddr vmap @%s%s", baseChain, f.match, egress, f.suffix)
	}
	s.line("add rule %s %s goto %s", baseChain, toIngress)
	s.WriteString(deltaOf(netpol.Diff(nil, r), nb))
	return s.String()
}

// Delta is one nft transaction that turns the table of the rules changes
// start from (their Old sides) into the table of the rules they end at
// (their New sides), as netpol.Diff gives them; "" when nothing in the
// table changes. Within the transaction, the map elements go first (a
// pod's address may pass to another pod), their additions last; a chain
// gets its bucket chains before it jumps to them, and loses its jumps
// before they are deleted.
func Delta(changes []netpol.PodChange) string { return deltaOf(changes, Buckets) }

// deltaOf is Delta with nb buckets a pod side.
func deltaOf(changes []netpol.PodChange, nb uint64) string {
	var del, chains, add script
	for _, c := range changes {
		for _, d := range directions {
			if c.Delta != nil && d.appended(&chains, c, nb) {
				continue
			}
			if c.Old != nil && c.New != nil && slices.Equal(c.Old.IPs, c.New.IPs) && d.side(c.Old).Equal(d.side(c.New)) {
				continue // the pod's other side changed
			}
			old := d.of(c.Old, nb, nil)
			d.delta(&del, &chains, &add, old, d.of(c.New, nb, old))
		}
	}
	return del.String() + chains.String() + add.String()
}

// direction is one side of a pod in the table: its maps' and chains'
// prefix, the peer's address field, what a rule allowing does (in nft's
// words, and as the expression netlink writes), and which of a pod's sides
// it is.
type direction struct {
	name, peer, verdict string
	verdictExpr         expr.Verdict
	side                func(*netpol.PodRules) netpol.Side
}

var directions = []direction{
	{egress, "daddr", "goto " + toIngress, expr.Verdict{Kind: expr.VerdictGoto, Chain: toIngress}, func(p *netpol.PodRules) netpol.Side { return p.Egress }},
	{ingress, "saddr", "accept", expr.Verdict{Kind: expr.VerdictAccept}, func(p *netpol.PodRules) netpol.Side { return p.Ingress }},
}

// chain is the name of pod p's chain of direction d.
func (d direction) chain(p *netpol.PodRules) string { return d.name + "-" + p.Namespace + "/" + p.Pod }

// bucket is the name of pod chain c's bucket chain k.
func bucket(c string, k int) string { return c + "/" + strconv.Itoa(k) }

// podChains is one isolated side of a pod as the table holds it: the pod
// chain's name, the pod's addresses, and its Allows by bucket.
type podChains struct {
	name string
	ips  []netip.Addr
	*netpol.Buckets
}

// of is pod p's side in direction d over nb buckets, nil when p has no
// rules or is not isolated that way; was (nil: none) is the same side
// before, whose buckets the Allows both hold at their ends keep.
func (d direction) of(p *netpol.PodRules, nb uint64, was *podChains) *podChains {
	if p == nil || !d.side(p).Isolated {
		return nil
	}
	var prev *netpol.Buckets
	if was != nil {
		prev = was.Buckets
	}
	return &podChains{name: d.chain(p), ips: p.IPs, Buckets: netpol.NewBuckets(d.side(p).Allow, int(nb), prev)}
}

// appended writes to chains the side d of change c when its delta only
// adds Allows to buckets the pod's side already has (appends): their rules
// appended to those bucket chains (a bucket's rules only allow, so their
// order does not matter), nothing else of the pod written; it says whether
// it did (else the side is written by its buckets, delta).
func (d direction) appended(chains *script, c netpol.PodChange, nb uint64) bool {
	sd := d.sideDelta(c.Delta)
	switch {
	case len(sd.Came)+len(sd.Went) == 0:
		return true // this side did not change
	case !d.side(c.New).Isolated:
		return false
	case len(sd.Went) > 0:
		return d.refilled(chains, c, sd, nb)
	}
	need, ok := d.appends(c, nb)
	if !ok {
		return false
	}
	for _, x := range need {
		d.rules(chains, x.chain, x.a)
	}
	return true
}

// appendTo is an Allow whose rules are appended to a bucket chain.
type appendTo struct {
	chain string
	a     *netpol.Allow
}

// appends is the Allows side d of change c gains, with the bucket chain
// each goes to, when that is all the side's change is (ok): Allows added
// to buckets it already has, none taken. Whether a bucket is there is
// found by hashing the old Allows until one of each bucket needed turns
// up: a pod of 10,000 Allows over Buckets buckets costs some hundreds of
// hashes, not 10,000 and a comparison of both lists.
func (d direction) appends(c netpol.PodChange, nb uint64) (need []appendTo, ok bool) {
	sd := d.sideDelta(c.Delta)
	if len(sd.Went) > 0 || !d.side(c.New).Isolated || !holdsEach(d.side(c.Old).Allow, bucketsOf(sd.Came, nb), nb) {
		return nil, false
	}
	return d.inBuckets(c, sd.Came, nb), true
}

// inBuckets is Allows as of side d of change c's pod, each with its bucket
// chain, in bucket order.
func (d direction) inBuckets(c netpol.PodChange, as []*netpol.Allow, nb uint64) []appendTo {
	out := make([]appendTo, 0, len(as))
	for _, a := range as {
		out = append(out, appendTo{bucket(d.chain(c.New), int(a.Hash()%nb)), a})
	}
	slices.SortStableFunc(out, func(x, y appendTo) int { return int(x.a.Hash()%nb) - int(y.a.Hash()%nb) })
	return out
}

// bucketsOf is the buckets (of nb) of Allows as.
func bucketsOf(as []*netpol.Allow, nb uint64) iter.Seq[uint64] {
	return func(yield func(uint64) bool) {
		for _, a := range as {
			if !yield(a.Hash() % nb) {
				return
			}
		}
	}
}

// holdsEach says whether allow has an Allow in each of buckets ks (of nb),
// hashing its Allows only until one of each turns up.
func holdsEach(allow []*netpol.Allow, ks iter.Seq[uint64], nb uint64) bool {
	need := map[uint64]bool{}
	for k := range ks {
		need[k] = true
	}
	for _, a := range allow {
		if len(need) == 0 {
			break
		}
		delete(need, a.Hash()%nb)
	}
	return len(need) == 0
}

// refilled writes to chains the side d of change c when its delta only
// takes Allows (sd.Went) from buckets that keep others: those bucket
// chains flushed and filled again from the side's Allows now, nothing else
// of the pod written; it says whether it did. The Allows now are hashed
// once, the old ones not at all.
func (d direction) refilled(chains *script, c netpol.PodChange, sd netpol.SideDelta, nb uint64) bool {
	if len(sd.Came) > 0 {
		return false
	}
	now := netpol.NewBuckets(d.side(c.New).Allow, int(nb), nil)
	var ks []int
	for _, a := range sd.Went {
		k := int(a.Hash() % nb)
		if len(now.In(k)) == 0 {
			return false // a bucket emptied: the pod chain changes
		}
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	for _, k := range ks {
		b := bucket(d.chain(c.New), k)
		chains.line("flush chain %s %s", b)
		for _, i := range now.In(k) {
			d.rules(chains, b, now.Allow[i])
		}
	}
	return true
}

// sideDelta is direction d's side of delta x.
func (d direction) sideDelta(x *netpol.AllowDelta) netpol.SideDelta {
	if d.name == ingress {
		return x.Ingress
	}
	return x.Egress
}

// in is the indices of bucket n's Allows (none when c is nil).
func (c *podChains) in(n int) []int32 {
	if c == nil {
		return nil
	}
	return c.In(n)
}

// counter is the name of the pod chain's counter that ends in kind.
func (c *podChains) counter(kind string) string { return c.name + "/" + kind }

// delta writes what turns pod side old (nil: not isolated) into new: the
// elements of the verdict maps deleted to del and added to add, the chains
// and counters to chains.
func (d direction) delta(del, chains, add *script, old, new *podChains) {
	if old == nil && new == nil {
		return
	}
	d.elements(del, "delete", old, new)
	d.elements(add, "add", new, old)
	if old == nil {
		chains.line("add counter %s %s", new.counter(Evaluated))
		chains.line("add counter %s %s", new.counter(Denied))
		chains.line("add chain %s %s", new.name)
	}
	if new != nil {
		for _, n := range new.Used {
			b := bucket(new.name, n)
			switch {
			case len(old.in(n)) == 0:
				chains.line("add chain %s %s", b)
			case old.Same(new.Buckets, n):
				continue
			default:
				chains.line("flush chain %s %s", b)
			}
			for _, i := range new.in(n) {
				d.rules(chains, b, new.Allow[i])
			}
		}
		if old == nil || !slices.Equal(old.ips, new.ips) || !slices.Equal(old.Used, new.Used) {
			if old != nil {
				chains.line("flush chain %s %s", new.name)
			}
			d.podChain(chains, new)
		}
	} else {
		chains.line("flush chain %s %s", old.name)
		chains.line("delete chain %s %s", old.name)
	}
	if old == nil {
		return
	}
	for _, n := range old.Used {
		if len(new.in(n)) == 0 {
			b := bucket(old.name, n)
			chains.line("flush chain %s %s", b)
			chains.line("delete chain %s %s", b)
		}
	}
	if new == nil {
		chains.line("delete counter %s %s", old.counter(Evaluated))
		chains.line("delete counter %s %s", old.counter(Denied))
	}
}

// podChain writes the rules of pod chain c.
func (d direction) podChain(s *script, c *podChains) {
	s.line("add rule %s %s counter name %s", c.name, c.counter(Evaluated))
	// A pod reaching its own address is always allowed (the model's
	// rule): in a lab the packet never leaves the pod; in a cluster
	// kube-proxy's hairpin (a pod through its own Service) crosses the
	// forward hook with the pod's address both ways, its masquerade after.
	// vnetlab's eBPF proxy sends a hairpin straight back into the pod,
	// past this table (bpf/lb.h).
	for _, f := range families {
		if own := f.of(c.ips); len(own) > 0 {
			s.line("add rule %s %s %s %s { %s } %s", c.name, f.match, d.peer, strings.Join(own, ", "), d.verdict)
		}
	}
	for _, n := range c.Used {
		s.line("add rule %s %s jump %s", c.name, bucket(c.name, n))
	}
	s.line("add rule %s %s counter name %s drop", c.name, c.counter(Denied))
}

// elements writes verb ("add", "delete") for the verdict map elements of
// pod side a's addresses that side b lacks (a nil: none).
func (d direction) elements(s *script, verb string, a, b *podChains) {
	if a == nil {
		return
	}
	for _, f := range families {
		var el []string
		for _, ip := range a.ips {
			switch {
			case !f.has(ip) || b != nil && slices.Contains(b.ips, ip):
			case verb == "add":
				el = append(el, ip.String()+" : goto "+a.name)
			default:
				el = append(el, ip.String())
			}
		}
		if len(el) > 0 {
			s.line(verb+" element %s %s%s { %s }", d.name, f.suffix, strings.Join(el, ", "))
		}
	}
}

// rules writes to s the rules of Allow a in bucket chain b, each with the
// key of its text as its comment (ruleKey), by which Apply finds it to
// delete it.
func (d direction) rules(s *script, b string, a *netpol.Allow) {
	for _, r := range d.ruleTexts(a) {
		s.line("add rule %s %s %s comment %q", b, r, ruleKey(r))
	}
}

// ruleTexts is the rules of Allow a in direction d, in nft's words: a rule
// per peerMatch, each its match, its ports' match and d's verdict.
func (d direction) ruleTexts(a *netpol.Allow) []string {
	ports := portsText(a)
	var out []string
	for _, m := range matchesOf(a) {
		out = append(out, m.text(d.peer)+ports+d.verdict)
	}
	return out
}

// peerMatch is the peers one rule of an Allow matches: any (f nil), the
// pod addresses of family f, or one ipBlock of it.
type peerMatch struct {
	f     *family
	pods  []netip.Addr
	block *netpol.Block
}

// matchesOf is the peers of Allow a, a rule each: per family its pod
// addresses, then each of its ipBlocks; or any peer.
func matchesOf(a *netpol.Allow) []peerMatch {
	if a.AnyPeer {
		return []peerMatch{{}}
	}
	var out []peerMatch
	for i := range families {
		f := &families[i]
		var pods []netip.Addr
		for _, ip := range a.Pods {
			if f.has(ip) {
				pods = append(pods, ip)
			}
		}
		if len(pods) > 0 {
			out = append(out, peerMatch{f: f, pods: pods})
		}
		for j := range a.Blocks {
			if f.has(a.Blocks[j].CIDR.Addr()) {
				out = append(out, peerMatch{f: f, block: &a.Blocks[j]})
			}
		}
	}
	return out
}

// text is m in nft's words, ending in a space ("" for any peer); peer is
// "saddr" (ingress) or "daddr" (egress).
func (m peerMatch) text(peer string) string {
	switch {
	case m.f == nil:
		return ""
	case m.block == nil:
		return fmt.Sprintf("%s %s { %s } ", m.f.match, peer, strings.Join(m.f.of(m.pods), ", "))
	}
	s := fmt.Sprintf("%s %s %s ", m.f.match, peer, m.block.CIDR)
	if len(m.block.Except) > 0 {
		var ex []string
		for _, e := range m.block.Except {
			ex = append(ex, e.String())
		}
		s += fmt.Sprintf("%s %s != { %s } ", m.f.match, peer, strings.Join(ex, ", "))
	}
	return s
}

// portsText is the match of Allow a's ports in nft's words, ending in a
// space ("" for any port): a set of `l4proto . port` intervals.
func portsText(a *netpol.Allow) string {
	if a.AnyPort {
		return ""
	}
	var el []string
	for _, r := range a.Ports {
		if r.First == r.Last {
			el = append(el, fmt.Sprintf("%s . %d", r.Proto.Lower(), r.First))
		} else {
			el = append(el, fmt.Sprintf("%s . %d-%d", r.Proto.Lower(), r.First, r.Last))
		}
	}
	return "meta l4proto . th dport { " + strings.Join(el, ", ") + " } "
}

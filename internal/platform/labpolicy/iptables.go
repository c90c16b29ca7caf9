package labpolicy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// iptables: the shape of kube-router's and Calico's iptables policy
// agents, in every node's namespace and for each of the lab's families
// (iptables and ip6tables): FORWARD's first rule jumps to VNL-NETPOL, which
// accepts conntrack's established and related packets (and IPv6 neighbour
// discovery) first, then sends each packet from a pod isolated for egress
// to that pod's chain VNL-EG-<hash>, then jumps to VNL-INGRESS, which sends
// each packet to a pod isolated for ingress to VNL-IN-<hash>: one rule per
// isolated pod address, a linear walk, as kube-router's per-pod firewall
// chains. A pod chain jumps to its bucket chains (<chain>-<XX>) in turn,
// then DROPs: an Allow's rules are in bucket Allow.Hash() mod iptBuckets,
// in the pod's order. An ingress rule ACCEPTs; an egress rule jumps to
// VNL-PASS, which sends the packet through VNL-INGRESS and ACCEPTs what
// that lets pass (a RETURN in a bucket would return to the pod chain, not
// past it; kube-router, too, accepts what its pod chains passed). The
// peers of a compiled Allow are an ipset (hash:ip) of the peer pods'
// addresses, or an ipBlock's CIDR with its excepts as an ipset (hash:net)
// matched with `! --match-set`, each set named by its bucket and its
// members, so that a set never changes; its ports are -p PROTO -m
// multiport --dports lists.
//
// An Update writes only what the changed pods (netpol.Diff) change: the
// new sets first (ipset restore, each filled through a temporary set and
// swapped in), then one iptables-restore --noflush per family: the rules
// that go deleted (-D), those that come inserted at their place (-I) in
// the buckets whose Allows changed, the pod chains and VNL-NETPOL and
// VNL-INGRESS, new chains written and chains no longer named deleted;
// then the sets no longer named are destroyed. The other rules stay, with
// their counters. A bucket bounds what iptables-restore reads back to
// place a rule (iptables-nft fetches the rules of the chain it edits), and
// a change that only adds rules is cheap: nf_tables frees deleted rules
// after an RCU grace period, which the transaction's end waits for.
type iptablesProvider struct{}

func init() { Register(iptablesProvider{}) }

// The provider's chains, and the prefixes of its per-pod chains and sets.
const (
	iptChain    = "VNL-NETPOL"
	iptInChain  = "VNL-INGRESS"
	iptPass     = "VNL-PASS"
	iptIngress  = "VNL-IN-"
	iptEgress   = "VNL-EG-"
	ipsetPrefix = "vnl-"
	// iptBuckets: the bucket chains a pod chain spreads its Allows over
	// (at most 256: a bucket is a byte, named by two hex digits).
	iptBuckets = 64
	// multiportMax: entries one multiport match takes (a range counts two).
	multiportMax = 15
)

func (iptablesProvider) Info() Info {
	return Info{Name: IPTables, Summary: "kube-router's shape: FORWARD -> VNL-NETPOL (conntrack established first) -> a chain per isolated pod, its rules in bucket chains, ipsets of peer addresses, multiport lists", Stages: []string{"tables", "nf_sets"}}
}

func (iptablesProvider) Supports(m modes.Mode, options map[string]string) string {
	return nodeFilterSupports(m, options)
}

// iptFamily is what differs between the IPv4 and IPv6 rules.
type iptFamily struct {
	fam                  family.Family
	restore, cmd, ipsetF string
}

func iptFamilies(st *lab.State) []iptFamily {
	var out []iptFamily
	for _, f := range st.Spec.Family.Measured() {
		if f == family.IPv6 {
			out = append(out, iptFamily{f, "ip6tables-restore", "ip6tables", "inet6"})
		} else {
			out = append(out, iptFamily{f, "iptables-restore", "iptables", "inet"})
		}
	}
	return out
}

func (f iptFamily) has(a netip.Addr) bool { return family.Of(a) == f.fam }

// addrs is pod p's addresses of family f.
func (f iptFamily) addrs(p *netpol.PodRules) []netip.Addr {
	var out []netip.Addr
	for _, a := range p.IPs {
		if f.has(a) {
			out = append(out, a)
		}
	}
	return out
}

// iptTools are the programs the provider runs, with their Debian packages.
var iptTools = [][2]string{{"ipset", "ipset"}, {"iptables-restore", "iptables"}, {"ip6tables-restore", "iptables"}}

// Install checks the tools first: without one of them nothing is loaded.
func (p iptablesProvider) Install(st *lab.State, r *netpol.Rules) error {
	if err := needTools("the iptables policy provider", iptTools); err != nil {
		return err
	}
	return p.Update(st, nil, r, nil)
}

// needTools says, in one line, which of tools (program, Debian package)
// who needs and does not find.
func needTools(who string, tools [][2]string) error {
	for _, t := range tools {
		if _, err := exec.LookPath(t[0]); err != nil {
			return fmt.Errorf("%s needs %s, which is not installed (Debian: apt-get install %s)", who, t[0], t[1])
		}
	}
	return nil
}

// Update writes changes, the pods whose rules differ between old and r;
// without old (Install) every pod of r is new, and VNL-NETPOL's jump from
// FORWARD is added when missing.
func (iptablesProvider) Update(st *lab.State, old, r *netpol.Rules, changes []netpol.PodChange) error {
	if old == nil {
		changes = netpol.Diff(nil, r)
	}
	plan := iptPlan(iptFamilies(st), old, r, changes)
	return st.EachNode(func(ns string) error {
		for _, s := range plan {
			if err := run(ns, s.sets.String(), "ipset", "restore"); err != nil {
				return err
			}
			if err := run(ns, s.rules(), s.f.restore, "--noflush"); err != nil {
				return err
			}
			if old == nil && proc.Command(context.Background(), ns, s.f.cmd, "-C", "FORWARD", "-j", iptChain).Run() != nil {
				if err := run(ns, "*filter\n-I FORWARD 1 -j "+iptChain+"\nCOMMIT\n", s.f.restore, "--noflush"); err != nil {
					return err
				}
			}
			if err := run(ns, s.destroy.String(), "ipset", "restore"); err != nil {
				return err
			}
		}
		return nil
	})
}

func (iptablesProvider) Remove(st *lab.State) error {
	return st.EachNode(func(ns string) error {
		for _, f := range iptFamilies(st) {
			saved, err := proc.Command(context.Background(), ns, f.cmd+"-save", "-t", "filter").Output()
			if err != nil {
				return fmt.Errorf("%s-save in %s: %w", f.cmd, ns, err)
			}
			var b strings.Builder
			b.WriteString("*filter\n")
			var chains []string
			for _, line := range strings.Split(string(saved), "\n") {
				if line == "-A FORWARD -j "+iptChain {
					b.WriteString("-D FORWARD -j " + iptChain + "\n")
				}
				if name, ok := strings.CutPrefix(line, ":"); ok && strings.HasPrefix(name, "VNL-") {
					chains = append(chains, strings.Fields(name)[0])
				}
			}
			for _, ch := range chains {
				fmt.Fprintf(&b, ":%s - [0:0]\n", ch)
			}
			for _, ch := range chains {
				fmt.Fprintf(&b, "-X %s\n", ch)
			}
			b.WriteString("COMMIT\n")
			if err := run(ns, b.String(), f.restore, "--noflush"); err != nil {
				return err
			}
		}
		names, err := proc.Command(context.Background(), ns, "ipset", "list", "-n").Output()
		if err != nil {
			return fmt.Errorf("ipset list in %s: %w", ns, err)
		}
		var destroy strings.Builder
		for _, n := range strings.Fields(string(names)) {
			if strings.HasPrefix(n, ipsetPrefix) {
				fmt.Fprintf(&destroy, "destroy %s\n", n)
			}
		}
		return run(ns, destroy.String(), "ipset", "restore")
	})
}

// run feeds script to prog in namespace ns (nothing to do for an empty one).
func run(ns, script, prog string, args ...string) error {
	if script == "" {
		return nil
	}
	c := proc.Command(context.Background(), ns, prog, args...)
	c.Stdin = bytes.NewBufferString(script)
	if _, err := c.Output(); err != nil {
		return fmt.Errorf("%s in %s: %w", prog, ns, err)
	}
	return nil
}

// iptScript is what an Update writes in every node for one family: an
// ipset restore script creating the new sets; one iptables-restore
// --noflush transaction: the chains written whole or deleted, declared
// first (which flushes them), then the written chains' rules, the rules
// deleted and inserted one by one, the chains deleted; and an ipset
// restore script destroying the sets no rule names any more.
type iptScript struct {
	f                          iptFamily
	sets, destroy              strings.Builder
	decl, written, edits, gone strings.Builder
}

// rules is the iptables-restore transaction ("" when it changes nothing).
func (s *iptScript) rules() string {
	if s.decl.Len()+s.edits.Len() == 0 {
		return ""
	}
	return "*filter\n" + s.decl.String() + s.written.String() + s.edits.String() + s.gone.String() + "COMMIT\n"
}

// write makes chain hold rules, whatever it held.
func (s *iptScript) write(chain string, rules ...string) {
	fmt.Fprintf(&s.decl, ":%s - [0:0]\n", chain)
	for _, r := range rules {
		fmt.Fprintf(&s.written, "-A %s %s\n", chain, r)
	}
}

// drop deletes chain.
func (s *iptScript) drop(chain string) {
	fmt.Fprintf(&s.decl, ":%s - [0:0]\n", chain)
	fmt.Fprintf(&s.gone, "-X %s\n", chain)
}

// iptList is a chain's rules: items between a fixed head and tail.
type iptList struct {
	name              string
	head, items, tail []string
}

// chain takes a chain from was (nil: none) to is (nil: none): its items
// deleted (-D) and inserted at their place (-I), the rest untouched; the
// chain written whole when it is new, or when was and is hold their common
// items in another order.
func (s *iptScript) chain(was, is *iptList) {
	switch {
	case is == nil:
		if was != nil {
			s.drop(was.name)
		}
		return
	case was != nil:
		inWas, inIs := setOf(was.items), setOf(is.items)
		if !slices.Equal(only(was.items, inIs), only(is.items, inWas)) {
			break
		}
		for _, it := range was.items {
			if !inIs[it] {
				fmt.Fprintf(&s.edits, "-D %s %s\n", is.name, it)
			}
		}
		for i, it := range is.items {
			if !inWas[it] {
				fmt.Fprintf(&s.edits, "-I %s %d %s\n", is.name, len(is.head)+i+1, it)
			}
		}
		return
	}
	s.write(is.name, slices.Concat(is.head, is.items, is.tail)...)
}

func setOf(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, x := range list {
		m[x] = true
	}
	return m
}

// only is list's items that are in keep, in order.
func only(list []string, keep map[string]bool) []string {
	var out []string
	for _, x := range list {
		if keep[x] {
			out = append(out, x)
		}
	}
	return out
}

// iptDir is one direction of a pod's rules.
type iptDir struct {
	// prefix: its pod chains'; addr: the pod's address's match; peer: the
	// peer's side in a set match; verdict: an allowing rule's target.
	prefix, addr, peer, verdict string
	side                        func(*netpol.PodRules) netpol.Side
}

// iptDirs: egress first (VNL-NETPOL's jumps), then ingress (VNL-INGRESS's).
var iptDirs = []iptDir{
	{iptEgress, "-s", "dst", iptPass, func(p *netpol.PodRules) netpol.Side { return p.Egress }},
	{iptIngress, "-d", "src", "ACCEPT", func(p *netpol.PodRules) netpol.Side { return p.Ingress }},
}

// chain is pod p's chain of direction d in family f: "" when p (nil:
// none) is not isolated that way or has no address of f.
func (d iptDir) chain(f iptFamily, p *netpol.PodRules) string {
	if p == nil || !d.side(p).Isolated || len(f.addrs(p)) == 0 {
		return ""
	}
	return d.prefix + iptHash(p.Namespace, p.Pod)
}

// iptBucketed is one direction of a changed pod: its Allows by bucket
// before and after (nil: not isolated that way), and the buckets that hold
// an Allow not in both.
type iptBucketed struct {
	was, is *netpol.Buckets
	changed [iptBuckets]bool
}

// bucketed is direction d of changed pod c by bucket; the Allows both
// sides share at their start and at their end (all, when the other
// direction changed) are hashed once.
func (d iptDir) bucketed(c netpol.PodChange) iptBucketed {
	var out iptBucketed
	isolated := func(p *netpol.PodRules) bool { return p != nil && d.side(p).Isolated }
	var old []*netpol.Allow
	if isolated(c.Old) {
		old = d.side(c.Old).Allow
		out.was = netpol.NewBuckets(old, iptBuckets, nil)
	}
	if !isolated(c.New) {
		return out
	}
	now := d.side(c.New).Allow
	out.is = netpol.NewBuckets(now, iptBuckets, out.was)
	head, tail := netpol.CommonEnds(old, now)
	for i := head; i < len(now)-tail; i++ {
		out.changed[out.is.Key(i)] = true
	}
	for i := head; i < len(old)-tail; i++ {
		out.changed[out.was.Key(i)] = true
	}
	return out
}

// iptPlan is the scripts, one per family of fams, that take a node from
// old's rules (nil: none) to r's, changes being the pods whose rules
// differ.
func iptPlan(fams []iptFamily, old, r *netpol.Rules, changes []netpol.PodChange) []*iptScript {
	var plan []*iptScript
	for _, f := range fams {
		s := &iptScript{f: f}
		if old == nil {
			s.write(iptPass, "-j "+iptInChain, "-j ACCEPT")
		}
		wasEg, wasIn := iptDispatch(f, old)
		isEg, isIn := iptDispatch(f, r)
		s.chain(wasEg, isEg)
		s.chain(wasIn, isIn)
		plan = append(plan, s)
	}
	for _, c := range changes {
		for _, d := range iptDirs {
			b := d.bucketed(c)
			for _, s := range plan {
				s.pod(d, c, b)
			}
		}
	}
	return plan
}

// iptDispatch is family f's VNL-NETPOL, its items the jumps to the egress
// chains, and VNL-INGRESS, its items the jumps to the ingress chains: one
// per isolated pod address (nil, nil: r is nil).
func iptDispatch(f iptFamily, r *netpol.Rules) (eg, in *iptList) {
	if r == nil {
		return nil, nil
	}
	eg = &iptList{name: iptChain, head: []string{"-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"}, tail: []string{"-j " + iptInChain}}
	if f.fam == family.IPv6 {
		for _, typ := range []int{133, 134, 135, 136, 137} {
			eg.head = append(eg.head, fmt.Sprintf("-p ipv6-icmp -m icmp6 --icmpv6-type %d -j ACCEPT", typ))
		}
	}
	in = &iptList{name: iptInChain}
	for i := range r.Pods {
		p := &r.Pods[i]
		for j, d := range iptDirs {
			l := []*iptList{eg, in}[j]
			if chain := d.chain(f, p); chain != "" {
				for _, a := range f.addrs(p) {
					l.items = append(l.items, fmt.Sprintf("%s %s -j %s", d.addr, a, chain))
				}
			}
		}
	}
	return eg, in
}

// pod writes direction d of changed pod c, its Allows by bucket b: the pod
// chain's jumps to the buckets that hold Allows, then DROP; the buckets
// whose Allows changed, and the sets they name that they did not (created
// first), and those they named and no longer do (destroyed after).
func (s *iptScript) pod(d iptDir, c netpol.PodChange, b iptBucketed) {
	chain := d.prefix + iptHash(c.Key.Namespace, c.Key.Name)
	var wasPod, isPod *iptList
	was, is := b.was, b.is
	if d.chain(s.f, c.Old) != "" {
		wasPod = &iptList{name: chain, tail: []string{"-j DROP"}}
	} else {
		was = nil
	}
	if d.chain(s.f, c.New) != "" {
		isPod = &iptList{name: chain, tail: []string{"-j DROP"}}
	} else {
		is = nil
	}
	for k := range iptBuckets {
		bucket := fmt.Sprintf("%s-%02X", chain, k)
		wb, ib := was.In(k), is.In(k)
		if len(wb) > 0 {
			wasPod.items = append(wasPod.items, "-j "+bucket)
		}
		if len(ib) > 0 {
			isPod.items = append(isPod.items, "-j "+bucket)
		}
		if len(wb)+len(ib) == 0 || was != nil && is != nil && !b.changed[k] {
			continue
		}
		var wasB, isB *iptList
		wasRules, wasSets := iptRules(was, s.f, d, bucket, k)
		isRules, isSets := iptRules(is, s.f, d, bucket, k)
		if len(wb) > 0 {
			wasB = &iptList{name: bucket, items: wasRules}
		}
		if len(ib) > 0 {
			isB = &iptList{name: bucket, items: isRules}
		}
		s.chain(wasB, isB)
		for _, set := range isSets {
			if !slices.ContainsFunc(wasSets, set.same) {
				s.create(set)
			}
		}
		for _, set := range wasSets {
			if !slices.ContainsFunc(isSets, set.same) {
				fmt.Fprintf(&s.destroy, "destroy %s\n", set.name)
			}
		}
	}
	s.chain(wasPod, isPod)
}

// iptRules is the rules of bucket k of b (nil: none), chain chain, of
// direction d in family f, each once (a rule twice would never decide),
// and the sets they name.
func iptRules(b *netpol.Buckets, f iptFamily, d iptDir, chain string, k int) (rules []string, sets []iptSet) {
	seen := map[string]bool{}
	for _, i := range b.In(k) {
		a := b.Allow[i]
		peers, named := iptPeers(f, a, d.peer, chain)
		for _, set := range named {
			if !slices.ContainsFunc(sets, set.same) {
				sets = append(sets, set)
			}
		}
		for _, peer := range peers {
			for _, ports := range iptPorts(a) {
				if r := peer + ports + "-j " + d.verdict; !seen[r] {
					seen[r] = true
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, sets
}

// iptSet is an ipset a bucket's rules match: named by the bucket chain,
// its type and its members, so that a set never changes once created.
type iptSet struct {
	name, typ string
	entries   []string
}

func newIptSet(f iptFamily, chain, typ string, entries []string) iptSet {
	return iptSet{ipsetPrefix + iptHash(append([]string{string(f.fam), chain, typ}, entries...)...), typ, entries}
}

func (a iptSet) same(b iptSet) bool { return a.name == b.name }

// create adds set to the sets to create, filled through a temporary set
// and swapped in.
func (s *iptScript) create(set iptSet) {
	n, typ, fam := set.name, set.typ, s.f.ipsetF
	fmt.Fprintf(&s.sets, "create %s %s family %s -exist\ncreate %s-t %s family %s -exist\nflush %s-t\n", n, typ, fam, n, typ, fam, n)
	for _, e := range set.entries {
		fmt.Fprintf(&s.sets, "add %s-t %s\n", n, e)
	}
	fmt.Fprintf(&s.sets, "swap %s-t %s\ndestroy %s-t\n", n, n, n)
}

// iptHash names a chain or set (kube-router hashes the pod or policy).
func iptHash(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "|")))
	return base32.StdEncoding.EncodeToString(h[:])[:16]
}

// iptPeers is the peer matches (each ending in a space) of Allow a in
// family f, in bucket chain chain, and the sets they name: "" for any
// peer; none when it has no peer of the family.
func iptPeers(f iptFamily, a *netpol.Allow, dir, chain string) (matches []string, sets []iptSet) {
	if a.AnyPeer {
		return []string{""}, nil
	}
	var pods []string
	for _, ip := range a.Pods {
		if f.has(ip) {
			pods = append(pods, ip.String())
		}
	}
	if len(pods) > 0 {
		set := newIptSet(f, chain, "hash:ip", pods)
		sets = append(sets, set)
		matches = append(matches, fmt.Sprintf("-m set --match-set %s %s ", set.name, dir))
	}
	flag := map[string]string{"src": "-s", "dst": "-d"}[dir]
	for _, b := range a.Blocks {
		if !f.has(b.CIDR.Addr()) {
			continue
		}
		m := fmt.Sprintf("%s %s ", flag, b.CIDR)
		if len(b.Except) > 0 {
			var ex []string
			for _, e := range b.Except {
				ex = append(ex, e.String())
			}
			set := newIptSet(f, chain, "hash:net", ex)
			sets = append(sets, set)
			m += fmt.Sprintf("-m set ! --match-set %s %s ", set.name, dir)
		}
		matches = append(matches, m)
	}
	return matches, sets
}

// iptPorts is the port matches (each ending in a space) of Allow a: ""
// for any port, else -p PROTO with multiport lists of at most
// multiportMax entries (none for a protocol's every port).
func iptPorts(a *netpol.Allow) []string {
	if a.AnyPort {
		return []string{""}
	}
	var out []string
	byProto := map[netpol.Proto][]string{}
	var order []netpol.Proto
	for _, r := range a.Ports {
		if _, seen := byProto[r.Proto]; !seen {
			order = append(order, r.Proto)
			byProto[r.Proto] = nil
		}
		if r.First == 0 && r.Last == 65535 {
			byProto[r.Proto] = append(byProto[r.Proto], "all")
			continue
		}
		if r.First == r.Last {
			byProto[r.Proto] = append(byProto[r.Proto], fmt.Sprint(r.First))
		} else {
			byProto[r.Proto] = append(byProto[r.Proto], fmt.Sprintf("%d:%d", r.First, r.Last))
		}
	}
	for _, p := range order {
		if slices.Contains(byProto[p], "all") {
			out = append(out, fmt.Sprintf("-p %s ", p.Lower()))
			continue
		}
		var chunk []string
		n := 0
		flush := func() {
			if len(chunk) > 0 {
				out = append(out, fmt.Sprintf("-p %s -m multiport --dports %s ", p.Lower(), strings.Join(chunk, ",")))
			}
			chunk, n = nil, 0
		}
		for _, e := range byProto[p] {
			w := 1
			if strings.Contains(e, ":") {
				w = 2
			}
			if n+w > multiportMax {
				flush()
			}
			chunk = append(chunk, e)
			n += w
		}
		flush()
	}
	return out
}

// Prove reads every node's rules back with their counters
// (iptables-save -c, ip6tables-save -c) and its sets' members (ipset
// save): the provider's rules (FORWARD's jump, every VNL- chain's) and
// its sets' members against what the lab's compiled policies make; a
// packet VNL-NETPOL or VNL-INGRESS sent to an isolated pod's chain was
// evaluated, one that chain's DROP took was denied.
func (iptablesProvider) Prove(st *lab.State) (Proof, error) {
	r, err := SavedRules(st)
	if err != nil {
		return Proof{}, err
	}
	per := 0
	for _, s := range iptPlan(iptFamilies(st), nil, r, netpol.Diff(nil, r)) {
		// FORWARD's jump, the rules, the sets' members (each added to
		// its temporary set and swapped in).
		per += 1 + linesWith(s.rules(), "-A ") + linesWith(s.sets.String(), "add ")
	}
	var p Proof
	err = st.EachNode(func(ns string) error {
		p.Want += per
		for _, f := range iptFamilies(st) {
			out, err := proc.Command(context.Background(), ns, f.cmd+"-save", "-c", "-t", "filter").Output()
			if err != nil {
				return fmt.Errorf("%s-save in %s: %w", f.cmd, ns, err)
			}
			iptReadBack(string(out), &p)
		}
		out, err := proc.Command(context.Background(), ns, "ipset", "save").Output()
		if err != nil {
			return fmt.Errorf("ipset save in %s: %w", ns, err)
		}
		p.Objects += linesWith(string(out), "add "+ipsetPrefix)
		return nil
	})
	return p, err
}

// iptReadBack adds one family's provider rules in saved (iptables-save -c
// "[packets:bytes] -A CHAIN ...") to p, with the counters of the jumps
// of VNL-NETPOL and VNL-INGRESS to pod chains (evaluated) and of the pod
// chains' DROPs (denied).
func iptReadBack(saved string, p *Proof) {
	for _, l := range strings.Split(saved, "\n") {
		count, rule, ok := strings.Cut(l, "] ")
		if !ok || !strings.HasPrefix(count, "[") {
			continue
		}
		if rule != "-A FORWARD -j "+iptChain && !strings.HasPrefix(rule, "-A VNL-") {
			continue
		}
		p.Objects++
		var packets, bytes uint64
		if _, err := fmt.Sscanf(count, "[%d:%d", &packets, &bytes); err != nil {
			continue
		}
		dispatch := strings.HasPrefix(rule, "-A "+iptChain+" ") || strings.HasPrefix(rule, "-A "+iptInChain+" ")
		switch {
		case dispatch && (strings.Contains(rule, " -j "+iptIngress) || strings.Contains(rule, " -j "+iptEgress)):
			p.Evaluated += packets
		case !dispatch && strings.HasSuffix(rule, " -j DROP"):
			p.Denied += packets
		}
	}
}

// linesWith counts the lines of text starting with prefix.
func linesWith(text, prefix string) int {
	n := 0
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

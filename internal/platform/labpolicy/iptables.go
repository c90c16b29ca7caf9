package labpolicy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net/netip"
	"os/exec"
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
// to that pod's chain VNL-EG-<hash> (RETURN when a rule allows, DROP
// otherwise) and each packet to a pod isolated for ingress to VNL-IN-<hash>
// (ACCEPT or DROP): one rule per isolated pod address, a linear walk, as
// kube-router's per-pod firewall chains. The peers of a compiled Allow are
// an ipset (hash:ip) of the peer pods' addresses, or an ipBlock's CIDR with
// its excepts as an ipset (hash:net) matched with `! --match-set`; its
// ports are -p PROTO -m multiport --dports lists. Sets are filled through a
// temporary set and swapped in (ipset restore), then the chains are
// rewritten in one iptables-restore --noflush; chains and sets the new
// rules no longer name are deleted after.
type iptablesProvider struct{}

func init() { Register(iptablesProvider{}) }

// The provider's chain, and the prefixes of its per-pod chains and sets.
const (
	iptChain    = "VNL-NETPOL"
	iptIngress  = "VNL-IN-"
	iptEgress   = "VNL-EG-"
	ipsetPrefix = "vnl-"
	// multiportMax: entries one multiport match takes (a range counts two).
	multiportMax = 15
)

func (iptablesProvider) Info() Info {
	return Info{Name: IPTables, Summary: "kube-router's shape: FORWARD -> VNL-NETPOL (conntrack established first) -> a chain per isolated pod, ipsets of peer addresses, multiport lists", Stages: []string{"tables", "nf_sets"}}
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

func (iptablesProvider) Update(st *lab.State, old, r *netpol.Rules, _ []netpol.PodChange) error {
	prev := old // the chains and sets to delete are old's that r lacks
	return st.EachNode(func(ns string) error {
		for _, f := range iptFamilies(st) {
			next := iptWrite(f, r)
			if err := run(ns, next.sets, "ipset", "restore"); err != nil {
				return err
			}
			stale := iptTables{}
			if prev != nil {
				stale = iptWrite(f, prev).minus(next)
			}
			var decl, del strings.Builder
			for _, ch := range stale.chains {
				fmt.Fprintf(&decl, ":%s - [0:0]\n", ch)
				fmt.Fprintf(&del, "-X %s\n", ch)
			}
			rules := next.head + decl.String() + next.rest + del.String() + "COMMIT\n"
			if err := run(ns, rules, f.restore, "--noflush"); err != nil {
				return err
			}
			if err := proc.Command(context.Background(), ns, f.cmd, "-C", "FORWARD", "-j", iptChain).Run(); err != nil {
				if err := run(ns, "*filter\n-I FORWARD 1 -j "+iptChain+"\nCOMMIT\n", f.restore, "--noflush"); err != nil {
					return err
				}
			}
			var destroy strings.Builder
			for _, s := range stale.setNames {
				fmt.Fprintf(&destroy, "destroy %s\n", s)
			}
			if err := run(ns, destroy.String(), "ipset", "restore"); err != nil {
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

// iptTables is one family's rules: the ipset restore script, the
// iptables-restore text, and the chains and sets they name.
type iptTables struct {
	sets string
	// head declares the chains; rest is the rules, without COMMIT.
	head, rest string
	chains     []string
	setNames   []string
}

// minus lists what t names and next does not.
func (t iptTables) minus(next iptTables) iptTables {
	var out iptTables
	for _, c := range t.chains {
		if !contains(next.chains, c) {
			out.chains = append(out.chains, c)
		}
	}
	for _, s := range t.setNames {
		if !contains(next.setNames, s) {
			out.setNames = append(out.setNames, s)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// iptHash names a chain or set (kube-router hashes the pod or policy).
func iptHash(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "|")))
	return base32.StdEncoding.EncodeToString(h[:])[:16]
}

// iptWrite is family f's rules and sets for r.
func iptWrite(f iptFamily, r *netpol.Rules) iptTables {
	var t iptTables
	var sets strings.Builder
	var head, body strings.Builder
	fmt.Fprintf(&head, "*filter\n:%s - [0:0]\n", iptChain)
	fmt.Fprintf(&body, "-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n", iptChain)
	if f.fam == family.IPv6 {
		for _, typ := range []int{133, 134, 135, 136, 137} {
			fmt.Fprintf(&body, "-A %s -p ipv6-icmp -m icmp6 --icmpv6-type %d -j ACCEPT\n", iptChain, typ)
		}
	}
	var jumps [2]strings.Builder // egress first, then ingress, as in nftables
	addSet := func(name, typ string, entries []string) {
		t.setNames = append(t.setNames, name)
		fmt.Fprintf(&sets, "create %s %s family %s -exist\ncreate %s-t %s family %s -exist\nflush %s-t\n", name, typ, f.ipsetF, name, typ, f.ipsetF, name)
		for _, e := range entries {
			fmt.Fprintf(&sets, "add %s-t %s\n", name, e)
		}
		fmt.Fprintf(&sets, "swap %s-t %s\ndestroy %s-t\n", name, name, name)
	}
	for _, p := range r.Pods {
		for i, s := range []struct {
			prefix, addr, peer, verdict string
			side                        netpol.Side
		}{
			{iptEgress, "-s", "dst", "RETURN", p.Egress},
			{iptIngress, "-d", "src", "ACCEPT", p.Ingress},
		} {
			var ips []netip.Addr
			for _, a := range p.IPs {
				if f.has(a) {
					ips = append(ips, a)
				}
			}
			if !s.side.Isolated || len(ips) == 0 {
				continue
			}
			chain := s.prefix + iptHash(p.Namespace, p.Pod)
			t.chains = append(t.chains, chain)
			fmt.Fprintf(&head, ":%s - [0:0]\n", chain)
			for _, a := range ips {
				fmt.Fprintf(&jumps[i], "-A %s %s %s -j %s\n", iptChain, s.addr, a, chain)
			}
			for j, a := range s.side.Allow {
				for _, peer := range iptPeers(f, a, s.peer, chain, j, addSet) {
					for _, ports := range iptPorts(a) {
						fmt.Fprintf(&body, "-A %s %s%s-j %s\n", chain, peer, ports, s.verdict)
					}
				}
			}
			fmt.Fprintf(&body, "-A %s -j DROP\n", chain)
		}
	}
	t.sets, t.head = sets.String(), head.String()
	t.rest = body.String() + jumps[0].String() + jumps[1].String()
	return t
}

// iptPeers is the peer matches (each ending in a space) of Allow a in
// family f: "" for any peer; none when it has no peer of the family.
func iptPeers(f iptFamily, a netpol.Allow, dir, chain string, j int, addSet func(name, typ string, entries []string)) []string {
	if a.AnyPeer {
		return []string{""}
	}
	var out, pods []string
	for _, ip := range a.Pods {
		if f.has(ip) {
			pods = append(pods, ip.String())
		}
	}
	if len(pods) > 0 {
		name := ipsetPrefix + iptHash(string(f.fam), chain, fmt.Sprint(j), "pods")
		addSet(name, "hash:ip", pods)
		out = append(out, fmt.Sprintf("-m set --match-set %s %s ", name, dir))
	}
	flag := map[string]string{"src": "-s", "dst": "-d"}[dir]
	for k, b := range a.Blocks {
		if !f.has(b.CIDR.Addr()) {
			continue
		}
		m := fmt.Sprintf("%s %s ", flag, b.CIDR)
		if len(b.Except) > 0 {
			name := ipsetPrefix + iptHash(string(f.fam), chain, fmt.Sprint(j), "except", fmt.Sprint(k))
			var ex []string
			for _, e := range b.Except {
				ex = append(ex, e.String())
			}
			addSet(name, "hash:net", ex)
			m += fmt.Sprintf("-m set ! --match-set %s %s ", name, dir)
		}
		out = append(out, m)
	}
	return out
}

// iptPorts is the port matches (each ending in a space) of Allow a: ""
// for any port, else -p PROTO with multiport lists of at most
// multiportMax entries (none for a protocol's every port).
func iptPorts(a netpol.Allow) []string {
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
		if contains(byProto[p], "all") {
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
// packet VNL-NETPOL sent to an isolated pod's chain was evaluated, one
// that chain's DROP took was denied.
func (iptablesProvider) Prove(st *lab.State) (Proof, error) {
	r, err := SavedRules(st)
	if err != nil {
		return Proof{}, err
	}
	per := 0
	for _, f := range iptFamilies(st) {
		t := iptWrite(f, r)
		// FORWARD's jump, the rules, the sets' members (each added to
		// its temporary set and swapped in).
		per += 1 + linesWith(t.rest, "-A ") + linesWith(t.sets, "add ")
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
// "[packets:bytes] -A CHAIN ...") to p, with the counters of VNL-NETPOL's
// jumps to pod chains (evaluated) and of the pod chains' DROPs (denied).
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
		switch {
		case strings.HasPrefix(rule, "-A "+iptChain+" ") && (strings.Contains(rule, " -j "+iptIngress) || strings.Contains(rule, " -j "+iptEgress)):
			p.Evaluated += packets
		case !strings.HasPrefix(rule, "-A "+iptChain+" ") && strings.HasSuffix(rule, " -j DROP"):
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

package labservice

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// iptables: kube-proxy's iptables mode (pkg/proxy/iptables/proxier.go) in
// the node's namespace. nat PREROUTING/OUTPUT jump to KUBE-SERVICES, one rule
// per service matching clusterIP/proto/port, in order: the lookup is a linear
// walk, which is what makes thousands of services cost connections/s. Each
// service chain KUBE-SVC-<hash> picks an endpoint chain KUBE-SEP-<hash> with
// `-m statistic --mode random --probability 1/(n-i)`; a KUBE-SEP DNATs to its
// backend. Hairpin (a pod reaching itself through its service) and traffic
// from outside the pod network are marked (KUBE-MARK-MASQ) and masqueraded
// in KUBE-POSTROUTING. Everything is loaded in bulk with
// `iptables-restore --noflush`, never a command per rule. IPv6 Services get
// the same rules through ip6tables-restore (nfFamily), in a lab with IPv6.
//
// Measured limits of iptables-nft 1.8.9 shape how: one restore creating many
// chains costs time quadratic in their number (10k services: 17 s of CPU in
// one restore, 1.1 s in four), appending 64k rules to one chain in one
// restore took 132 s, and iptables-save of 100k services crashed (SIGSEGV).
// So Install writes chains and KUBE-SERVICES in chunks of iptablesChunk, and
// Update applies the difference from the previous config (as kube-proxy's
// partial sync) instead of reading the table back.
type iptablesProvider struct{}

func init() { Register(iptablesProvider{}) }

func (iptablesProvider) Info() Info {
	return Info{Name: IPTables, IPv6: true, NodeNAT: true, Summary: "kube-proxy iptables mode: KUBE-SERVICES -> KUBE-SVC-* -> KUBE-SEP-* (linear lookup), iptables-restore (ip6tables-restore for IPv6)"}
}
func (iptablesProvider) Supports(m modes.Mode) string { return netfilterSupports(m) }
func (iptablesProvider) Caveat(m modes.Mode, options map[string]string) string {
	return netfilterCaveat(m, options)
}

// iptablesChunk: services per iptables-restore when loading many.
const iptablesChunk = 2000

func (iptablesProvider) Install(st *lab.State, c *Config) error {
	return eachNodeFamily(st, func(ns string, f nfFamily) error { return iptablesInstall(ns, f, st, c) })
}

func iptablesInstall(ns string, f nfFamily, st *lab.State, c *Config) error {
	svcs := f.of(c.All())
	w := newIptablesWriter(st, c, f)
	if err := f.restore(ns, w.base()); err != nil {
		return err
	}
	// Chains first, then the rules leading to them: nothing refers to a chain
	// before it is complete.
	for i := 0; i < len(svcs); i += iptablesChunk {
		if err := f.restore(ns, w.serviceChains(svcs[i:min(i+iptablesChunk, len(svcs))])); err != nil {
			return err
		}
	}
	for i := 0; i < len(svcs); i += iptablesChunk {
		if err := f.restore(ns, w.dispatch(svcs[i:min(i+iptablesChunk, len(svcs))], nil, nil)); err != nil {
			return err
		}
	}
	return nil
}

// Update changes only what differs between old and c, in one restore (after
// new chains are written): dispatch rules of removed or changed services are
// deleted, new ones appended, stale chains deleted. A service whose backends
// change gets new chains (their names hash the backends too), so the switch
// is atomic.
func (iptablesProvider) Update(st *lab.State, old, c *Config) error {
	return eachNodeFamily(st, func(ns string, f nfFamily) error { return iptablesUpdate(ns, f, st, old, c) })
}

func iptablesUpdate(ns string, f nfFamily, st *lab.State, old, c *Config) error {
	added, removed, had, want := iptablesChains.diff(f.of(old.All()), f.of(c.All()))
	var stale []string
	for ch := range had {
		if !want[ch] {
			stale = append(stale, ch)
		}
	}
	w := newIptablesWriter(st, c, f)
	for i := 0; i < len(added); i += iptablesChunk {
		if err := f.restore(ns, w.serviceChains(added[i:min(i+iptablesChunk, len(added))])); err != nil {
			return err
		}
	}
	// -D must repeat the rule as it was written, comments included.
	wOld := newIptablesWriter(st, old, f)
	return f.restore(ns, w.dispatch(added, wOld.deletes(removed), stale))
}

func (iptablesProvider) Remove(st *lab.State, c *Config) error {
	return eachNodeFamily(st, func(ns string, f nfFamily) error { return iptablesRemove(ns, f, c) })
}

func iptablesRemove(ns string, f nfFamily, c *Config) error {
	// From the config (iptables-save does not survive 100k services); if the
	// lab holds something else (an interrupted install), list what is there.
	if err := f.restore(ns, iptablesRemoval(baseJumps, iptablesChainList(f.of(c.All())))); err == nil {
		return nil
	}
	chains, jumps, err := kubeChains(ns, f)
	if err != nil {
		return err
	}
	if len(chains) == 0 && len(jumps) == 0 {
		return nil
	}
	return f.restore(ns, iptablesRemoval(jumps, chains))
}

// baseJumps hook kube-proxy's chains into nat, as iptables-save prints them.
var baseJumps = []string{
	"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
	"-A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
	"-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING",
}

func iptablesRemoval(jumps, chains []string) string {
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, ch := range chains {
		fmt.Fprintf(&b, ":%s - [0:0]\n", ch)
	}
	for _, j := range jumps {
		fmt.Fprintf(&b, "-D %s\n", strings.TrimPrefix(j, "-A "))
	}
	for _, ch := range chains {
		fmt.Fprintf(&b, "-X %s\n", ch)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// svcChain names a service's chain; unlike kube-proxy's, the hash also
// covers the backends, so that changing them is a switch to a new chain.
func svcChain(s Service) string {
	return "KUBE-SVC-" + chainHash(portName(s), s.Proto, backendsKey(s))
}

func sepChain(s Service, b Backend) string {
	return "KUBE-SEP-" + chainHash(portName(s), s.Proto, b.String())
}

// iptablesChains: KUBE-SVC-* per service, KUBE-SEP-* per backend.
var iptablesChains = chainNaming{service: svcChain, backend: sepChain}

// iptablesChainList: every chain of svcs plus the fixed ones.
func iptablesChainList(svcs []Service) []string {
	out := []string{"KUBE-SERVICES", "KUBE-MARK-MASQ", "KUBE-POSTROUTING"}
	for ch := range iptablesChains.set(svcs) {
		out = append(out, ch)
	}
	return out
}

// iptablesWriter writes the nat table of one family in iptables-restore format.
type iptablesWriter struct {
	podCIDR  string
	comments bool
	f        nfFamily
}

func newIptablesWriter(st *lab.State, c *Config, f nfFamily) iptablesWriter {
	return iptablesWriter{podCIDR: f.podCIDR(st), comments: endpointCount(c.All()) <= largeCluster, f: f}
}

func (w iptablesWriter) comment(text string) string {
	if !w.comments {
		return ""
	}
	return fmt.Sprintf(" -m comment --comment %q", text)
}

// base creates kube-proxy's fixed chains and hooks them into nat.
func (w iptablesWriter) base() string {
	var b strings.Builder
	b.WriteString("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:KUBE-POSTROUTING - [0:0]\n")
	for _, j := range baseJumps {
		b.WriteString(j + "\n")
	}
	fmt.Fprintf(&b, "-A KUBE-MARK-MASQ -j MARK --or-mark %s\n", masqMark)
	fmt.Fprintf(&b, "-A KUBE-POSTROUTING -m mark ! --mark %s/%s -j RETURN\n", masqMark, masqMark)
	fmt.Fprintf(&b, "-A KUBE-POSTROUTING -j MARK --xor-mark %s\n", masqMark)
	b.WriteString("-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully\n")
	b.WriteString("COMMIT\n")
	return b.String()
}

// serviceChains writes the KUBE-SVC and KUBE-SEP chains of some services.
func (w iptablesWriter) serviceChains(svcs []Service) string {
	var chains, rules bytes.Buffer
	chains.WriteString("*nat\n")
	for _, s := range svcs {
		name, sc := portName(s), svcChain(s)
		fmt.Fprintf(&chains, ":%s - [0:0]\n", sc)
		fmt.Fprintf(&rules, "-A %s ! -s %s -d %s/%d -p %s%s -m %s --dport %d -j KUBE-MARK-MASQ\n", sc, w.podCIDR, s.VIP, w.f.hostLen, s.Proto, w.comment(name+" cluster IP"), s.Proto, s.Port)
		n := len(s.Backends)
		for i, b := range s.Backends {
			sep := sepChain(s, b)
			fmt.Fprintf(&chains, ":%s - [0:0]\n", sep)
			if i < n-1 {
				fmt.Fprintf(&rules, "-A %s%s -m statistic --mode random --probability %0.11f -j %s\n", sc, w.comment(name+" -> "+b.String()), 1.0/float64(n-i), sep)
			} else {
				fmt.Fprintf(&rules, "-A %s%s -j %s\n", sc, w.comment(name+" -> "+b.String()), sep)
			}
			fmt.Fprintf(&rules, "-A %s -s %s/%d%s -j KUBE-MARK-MASQ\n", sep, b.IP, w.f.hostLen, w.comment(name))
			fmt.Fprintf(&rules, "-A %s -p %s%s -m %s -j DNAT --to-destination %s\n", sep, s.Proto, w.comment(name), s.Proto, b)
		}
	}
	rules.WriteString("COMMIT\n")
	return chains.String() + rules.String()
}

// dispatchRule is a service's rule in KUBE-SERVICES (without -A/-D).
func (w iptablesWriter) dispatchRule(s Service) string {
	return fmt.Sprintf("KUBE-SERVICES -d %s/%d -p %s%s -m %s --dport %d -j %s", s.VIP, w.f.hostLen, s.Proto, w.comment(portName(s)+" cluster IP"), s.Proto, s.Port, svcChain(s))
}

func (w iptablesWriter) deletes(svcs []Service) []string {
	var out []string
	for _, s := range svcs {
		out = append(out, "-D "+w.dispatchRule(s))
	}
	return out
}

// dispatch appends services to KUBE-SERVICES, after running the given
// deletions, and deletes stale chains, in one restore. Generated services
// are loaded first, so every lookup of a configured service walks past all
// of them (the worst case; kube-proxy's order is arbitrary, so on average a
// lookup walks half).
func (w iptablesWriter) dispatch(add []Service, deletes, stale []string) string {
	var b bytes.Buffer
	b.Grow(len(add) * 130)
	b.WriteString("*nat\n")
	for _, ch := range stale {
		fmt.Fprintf(&b, ":%s - [0:0]\n", ch) // declaring flushes
	}
	for _, d := range deletes {
		b.WriteString(d + "\n")
	}
	for _, s := range add {
		b.WriteString("-A " + w.dispatchRule(s) + "\n")
	}
	for _, ch := range stale {
		fmt.Fprintf(&b, "-X %s\n", ch)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// kubeChains lists the KUBE-* chains of the node's nat table of family f
// and the rules of the built-in chains that jump into them (from
// iptables-save; only used to clean up after an interrupted install, where
// the config is no guide).
func kubeChains(ns string, f nfFamily) (chains, jumps []string, err error) {
	out, err := proc.Command(context.Background(), ns, f.save, "-t", "nat").Output()
	if err != nil {
		return nil, nil, fmt.Errorf("%s in %s: %w", f.save, ns, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ":KUBE-"):
			chains = append(chains, strings.Fields(line[1:])[0])
		case strings.HasPrefix(line, "-A PREROUTING ") || strings.HasPrefix(line, "-A OUTPUT ") || strings.HasPrefix(line, "-A POSTROUTING "):
			if strings.HasSuffix(line, "-j KUBE-SERVICES") || strings.HasSuffix(line, "-j KUBE-POSTROUTING") {
				jumps = append(jumps, line)
			}
		}
	}
	return chains, jumps, sc.Err()
}

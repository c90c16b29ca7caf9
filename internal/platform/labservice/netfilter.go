package labservice

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// What iptables and nftables share: kube-proxy runs either in the node's
// namespace, so clusterIP traffic must reach the node's netfilter hooks.

// netfilterSupports: the mode's pods' clusterIP traffic must cross the
// node's stack (modes.ReachNodeNetfilter), and the mode must not say why not.
func netfilterSupports(m modes.Mode) string {
	if why := podMode(m); why != "" {
		return why
	}
	if m.Services.NoNetfilter != "" {
		return m.Services.NoNetfilter
	}
	if m.Services.Reach != modes.ReachNodeNetfilter {
		return notWired(func(m modes.Mode) bool {
			return m.Services.Reach == modes.ReachNodeNetfilter && m.Services.NoNetfilter == ""
		})
	}
	return ""
}

// netfilterCaveat: the mode knows when the kernel will break netfilter
// Services (bridge with bridge_nf_call_iptables=off).
func netfilterCaveat(m modes.Mode, options map[string]string) string {
	if m.Services.NetfilterCaveat == nil {
		return ""
	}
	return m.Services.NetfilterCaveat(options)
}

// chainHash is kube-proxy's way of naming per-service chains: a hash of the
// service (and endpoint) name, base32, truncated.
func chainHash(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "|")))
	return base32.StdEncoding.EncodeToString(h[:])[:16]
}

// portName plays the part of kube-proxy's "namespace/name:port" for a service.
func portName(s Service) string {
	return fmt.Sprintf("vnetlab/%s:%d", s.VIP, s.Port)
}

// backendsKey lists a service's backends, for names that must change with them.
func backendsKey(s Service) string {
	var b strings.Builder
	for _, be := range s.Backends {
		b.WriteString(be.String())
		b.WriteByte(',')
	}
	return b.String()
}

// masqMark is kube-proxy's default masquerade bit (--iptables-masquerade-bit=14).
const masqMark = "0x4000"

// largeCluster: above this many endpoints kube-proxy stops writing rule
// comments (its "large cluster mode"), and so do we.
const largeCluster = 1000

func endpointCount(svcs []Service) int {
	n := 0
	for _, s := range svcs {
		n += len(s.Backends)
	}
	return n
}

// chainNaming is how a netfilter provider names a service's chains: one for
// the service, one per backend. Both providers diff configurations by it.
type chainNaming struct {
	service func(Service) string
	backend func(Service, Backend) string
}

// set lists every chain of svcs.
func (n chainNaming) set(svcs []Service) map[string]bool {
	m := map[string]bool{}
	for _, s := range svcs {
		m[n.service(s)] = true
		for _, b := range s.Backends {
			m[n.backend(s, b)] = true
		}
	}
	return m
}

// diff returns the services whose chain is new in next and those whose chain
// is gone from prev, with both chain sets. Chain names hash the backends, so a
// changed service is both removed (old chains) and added (new chains).
func (n chainNaming) diff(prev, next []Service) (added, removed []Service, had, want map[string]bool) {
	had, want = n.set(prev), n.set(next)
	for _, s := range next {
		if !had[n.service(s)] {
			added = append(added, s)
		}
	}
	for _, s := range prev {
		if !want[n.service(s)] {
			removed = append(removed, s)
		}
	}
	return added, removed, had, want
}

// nfFamily is what differs between a netfilter provider's IPv4 and IPv6
// rules: the tools, the address words and the pod network. Each provider
// writes both families through one code path with one of these, as
// kube-proxy runs one proxier per family.
type nfFamily struct {
	fam family.Family
	// restore loads iptables-restore text (iptables-restore or ip6tables-restore).
	restore func(ns, rules string) error
	save    string // iptables-save or ip6tables-save
	hostLen int    // a single address's prefix length: 32 or 128
	nft     string // nft's table family and address match: ip or ip6
	nftAddr string // nft's address type: ipv4_addr or ipv6_addr
}

var (
	nfIPv4 = nfFamily{fam: family.IPv4, restore: modes.IptablesRestore, save: "iptables-save", hostLen: 32, nft: "ip", nftAddr: "ipv4_addr"}
	nfIPv6 = nfFamily{fam: family.IPv6, restore: modes.Ip6tablesRestore, save: "ip6tables-save", hostLen: 128, nft: "ip6", nftAddr: "ipv6_addr"}
)

// nfFamilies are the families of lab st, IPv4 first: a netfilter provider
// writes the rules of each (an ipv4 lab's are exactly what they were
// before IPv6 existed).
func nfFamilies(st *lab.State) []nfFamily {
	var out []nfFamily
	for _, f := range st.Spec.Family.Measured() {
		out = append(out, nfFor(f))
	}
	return out
}

// nfFor is the netfilter side of family f (ipv4 or ipv6).
func nfFor(f family.Family) nfFamily {
	if f == family.IPv6 {
		return nfIPv6
	}
	return nfIPv4
}

// podCIDR is the lab's pod network of this family.
func (f nfFamily) podCIDR(st *lab.State) string {
	if f.fam == family.IPv6 {
		return st.Spec.PodCIDR6
	}
	return st.Spec.PodCIDR
}

// of keeps the services of this family.
func (f nfFamily) of(svcs []Service) []Service {
	var out []Service
	for _, s := range svcs {
		if family.Of(s.VIP) == f.fam {
			out = append(out, s)
		}
	}
	return out
}

// eachNodeFamily runs fn for every node and every family of the lab.
func eachNodeFamily(st *lab.State, fn func(ns string, f nfFamily) error) error {
	return st.EachNode(func(ns string) error {
		for _, f := range nfFamilies(st) {
			if err := fn(ns, f); err != nil {
				return err
			}
		}
		return nil
	})
}

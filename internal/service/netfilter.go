package service

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/modes"
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

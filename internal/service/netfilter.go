package service

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
)

// What iptables and nftables share: kube-proxy runs either in the node's
// namespace, so clusterIP traffic must reach the node's netfilter hooks.

// netfilterModes: where pods' clusterIP traffic crosses the node's stack.
// macvlan/ipvlan: the pods' default route leads to the node's shim (seed
// 002), so node rules see it (and the shim's MASQUERADE brings replies back).
// netkit: routed by the node like veth-routed.
var netfilterModes = map[string]bool{"veth-routed": true, "bridge": true, "docker-nat": true, "macvlan": true, "ipvlan": true, "netkit": true}

func netfilterSupports(mode string) string {
	if mode == "host" {
		return "mode host has no pods to put behind a clusterIP"
	}
	switch mode {
	case "veth-ebpf":
		// Cilium's BPF host routing likewise needs its eBPF kube-proxy replacement.
		return "veth-ebpf delivers pod-to-pod packets with bpf_redirect_peer, past the node's conntrack, so a backend's replies would never be translated back to the clusterIP: use --provider ebpf (folded into the same programs) or ebpf-sock"
	case "macvlan-ebpf":
		return "macvlan-ebpf is macvlan with vnetlab's eBPF Services built in: use --provider ebpf (or mode macvlan for iptables/nftables)"
	}
	if !netfilterModes[mode] {
		return "not wired for this mode yet (works with: veth-routed, bridge, docker-nat, macvlan, ipvlan, netkit)"
	}
	return ""
}

// netfilterCaveat: with bridge-nf-call-iptables=0 the backend's replies are
// switched by the bridge straight to the client without crossing netfilter,
// so conntrack never turns their source back into the clusterIP; the client
// sees a reply from the pod IP and resets it. The kernel decides this; vnetlab
// reports it rather than hiding it.
func netfilterCaveat(mode string, options map[string]string) string {
	if mode != "bridge" {
		return ""
	}
	switch strings.ToLower(options["bridge_nf_call_iptables"]) {
	case "off", "0", "false", "no":
		return "expected to fail: bridge_nf_call_iptables=off, so replies are bridged past netfilter and never reverse-NATed to the clusterIP (seed 002: the switch must stay on for clusterIP)"
	}
	return ""
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

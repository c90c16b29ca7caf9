// Package proxy is vnetlab's Kubernetes Service proxy (`vnetlab kube-proxy`),
// one per node in place of kube-proxy: client-go informers on Services and
// EndpointSlices, a pure translation of them into the entries of vnetlab's
// eBPF Service maps (this file), an incremental sync of those entries into
// the node's maps (internal/datapath/svcsync's Syncer),
// and the tc programs attached to every pod's
// node-side veth as the CNI makes it (links.go). docs/kubernetes-proxy.md
// says which Kubernetes semantics it implements.
package proxy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// Translate computes the entries of one Service on node `node` from the
// Service and its EndpointSlices, as kube-proxy does:
//   - one entry per clusterIP and port/protocol (TCP, UDP; SCTP is
//     skipped with a note); headless and ExternalName Services have none.
//     A dual-stack Service (ipFamilies of both, whatever its
//     ipFamilyPolicy) has a clusterIP per family, each served by the
//     endpoints of its own family (the EndpointSlices of that AddressType),
//     as kube-proxy's proxier per family does; a clusterIP that is not an
//     address is skipped with a note;
//   - a Service port's endpoints are those of the slice port with the same
//     name and protocol: the EndpointSlice controller resolved named
//     targetPorts per pod, so one Service port may have several numbers;
//   - only ready endpoints; if none is ready, the serving ones that are
//     terminating (kube-proxy's fallback), so a rollout never drops
//     connections it could serve; in an entry for every endpoint, a UDP
//     port's other serving endpoints follow, Draining: they keep their
//     flows and take no new one;
//   - internalTrafficPolicy Local: only endpoints on this node (none: the
//     entry stays, without backends, and its clients are refused);
//   - internalTrafficPolicy Cluster: the ready endpoints the slices' hints
//     give this node or its zone, when the hints say so (topology.go:
//     trafficDistribution, topology-aware routing), else all of them;
//   - a backend given twice (by two slices) counts once.
//
// Notes say what was skipped and why (one line each).
func Translate(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, at Node) (svcsync.Entries, []string) {
	var notes []string
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, nil
	}
	var vips []netip.Addr
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	if isHeadless(svc) {
		return nil, nil // DNS names the pods, no proxying
	}
	for _, s := range ips {
		a, ok := serviceAddr(s)
		if !ok {
			notes = append(notes, fmt.Sprintf("clusterIP %q skipped: not an IPv4 or IPv6 address", s))
			continue
		}
		vips = append(vips, a)
	}
	if len(vips) == 0 {
		return nil, notes
	}
	local := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	out := svcsync.Entries{}
	for _, sp := range svc.Spec.Ports {
		proto, ok := protoOf(sp.Protocol)
		if !ok {
			notes = append(notes, fmt.Sprintf("port %d/%s skipped: the data plane does TCP and UDP", sp.Port, sp.Protocol))
			continue
		}
		for _, vip := range vips {
			out[svcsync.Key{VIP: vip, Port: uint16(sp.Port), Proto: proto}] = backendsFor(sp, eps, at, local, vip.Is6())
		}
	}
	return out, append(notes, malformed(eps)...)
}

// serviceAddr parses a clusterIP or external IP: an IPv4 or IPv6 address
// (no zone, no IPv4-mapped IPv6: the API refuses both).
func serviceAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.Is4In6() {
		return netip.Addr{}, false
	}
	return a, true
}

// endpointAddr parses an endpoint's address in a slice of addressType t:
// an address of that family (the API validates it, but the proxy must not
// trust a malformed one: it is skipped, with malformed's note).
func endpointAddr(s string, t discoveryv1.AddressType) (netip.Addr, bool) {
	a, ok := serviceAddr(s)
	if !ok || (t == discoveryv1.AddressTypeIPv6) != a.Is6() {
		return netip.Addr{}, false
	}
	return a, true
}

// malformed names the endpoint addresses of IP slices that are not
// addresses of the slice's family: one note per slice.
func malformed(eps []*discoveryv1.EndpointSlice) []string {
	var notes []string
	for _, es := range eps {
		if !sliceOfFamily(es, es.AddressType == discoveryv1.AddressTypeIPv6) {
			continue
		}
		var bad []string
		for _, e := range es.Endpoints {
			for _, s := range e.Addresses {
				if _, ok := endpointAddr(s, es.AddressType); !ok {
					bad = append(bad, fmt.Sprintf("%q", s))
				}
			}
		}
		if len(bad) > 0 {
			notes = append(notes, fmt.Sprintf("EndpointSlice %s: endpoint address %s skipped: not an %s address (addressType %s)",
				es.Name, strings.Join(bad, ", "), es.AddressType, es.AddressType))
		}
	}
	return notes
}

// sliceOfFamily: es lists addresses of the family (IPv6 or IPv4); FQDN
// slices list names, which no proxy serves.
func sliceOfFamily(es *discoveryv1.EndpointSlice, v6 bool) bool {
	if v6 {
		return es.AddressType == discoveryv1.AddressTypeIPv6
	}
	return es.AddressType == discoveryv1.AddressTypeIPv4
}

// isHeadless: clusterIP None (DNS names the pods; kube-proxy skips such
// Services altogether, their externalIPs too).
func isHeadless(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP == corev1.ClusterIPNone || (len(svc.Spec.ClusterIPs) > 0 && svc.Spec.ClusterIPs[0] == corev1.ClusterIPNone)
}

// DefaultAffinityTimeout is Kubernetes' default sessionAffinityConfig
// clientIP timeoutSeconds (3 hours).
const DefaultAffinityTimeout = 10800

// SessionAffinity is the affinity timeout (seconds) of every entry of the
// Service: sessionAffinity ClientIP -> sessionAffinityConfig.clientIP.
// timeoutSeconds, or 10800 when not given (the API defaults it too); None
// or unset -> 0 (no affinity). A value outside 1..86400 (the API refuses
// it) is clamped into that range.
func SessionAffinity(svc *corev1.Service) uint32 {
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return 0
	}
	c := svc.Spec.SessionAffinityConfig
	if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
		return DefaultAffinityTimeout
	}
	return uint32(min(max(*c.ClientIP.TimeoutSeconds, 1), tcbpf.MaxAffinity))
}

func protoOf(p corev1.Protocol) (tcbpf.Proto, bool) {
	switch p {
	case corev1.ProtocolTCP, "": // the API defaults it to TCP
		return tcbpf.TCP, true
	case corev1.ProtocolUDP:
		return tcbpf.UDP, true
	}
	return 0, false
}

// backendsFor collects one Service port's backends of one family (IPv6 or
// IPv4) from the slices: this node's (local), or the cluster's narrowed by
// the hints (topologyOf), as kube-proxy's local and cluster endpoints.
func backendsFor(sp corev1.ServicePort, eps []*discoveryv1.EndpointSlice, at Node, local, v6 bool) []tcbpf.Backend {
	topo := topoAll
	if !local {
		topo = topologyOf(sp, eps, at, v6)
	}
	var ready, terminating []tcbpf.Backend
	eachEndpoint(sp, eps, v6, func(e *discoveryv1.Endpoint, b tcbpf.Backend) {
		if local && (e.NodeName == nil || *e.NodeName != at.Name) {
			return
		}
		switch {
		case isTrue(e.Conditions.Ready, true):
			if topo.serves(e, at) {
				ready = append(ready, b)
			}
		case isTrue(e.Conditions.Serving, false) && isTrue(e.Conditions.Terminating, false):
			terminating = append(terminating, b)
		}
	})
	if len(ready) == 0 {
		ready = terminating
	}
	ready = sortedBackends(ready)
	if sp.Protocol != corev1.ProtocolUDP || local {
		return ready
	}
	// A UDP port's other serving endpoints keep the flows they have
	// (Draining), as kube-proxy's conntrack cleanup keeps them: from_pod
	// asks (a node's outside clients' flows are nodeport_in's own).
	var draining []tcbpf.Backend
	for _, b := range servingBackends(sp, eps, v6) {
		if !slices.Contains(ready, b) {
			b.Draining = true
			draining = append(draining, b)
		}
	}
	return sortedBackends(append(ready, draining...))
}

// servingBackends are one Service port's serving endpoints of one family
// on every node, terminating or not (serving unset reads as ready).
func servingBackends(sp corev1.ServicePort, eps []*discoveryv1.EndpointSlice, v6 bool) []tcbpf.Backend {
	var out []tcbpf.Backend
	eachEndpoint(sp, eps, v6, func(e *discoveryv1.Endpoint, b tcbpf.Backend) {
		if isTrue(e.Conditions.Serving, isTrue(e.Conditions.Ready, true)) {
			out = append(out, b)
		}
	})
	return sortedBackends(out)
}

// eachEndpoint calls fn with every address of one family (IPv6 or IPv4)
// of the slices' endpoints, at the slice port of Service port sp.
func eachEndpoint(sp corev1.ServicePort, eps []*discoveryv1.EndpointSlice, v6 bool, fn func(*discoveryv1.Endpoint, tcbpf.Backend)) {
	for _, es := range eps {
		if !sliceOfFamily(es, v6) {
			continue
		}
		port, ok := slicePort(es, sp)
		if !ok {
			continue
		}
		for i := range es.Endpoints {
			e := &es.Endpoints[i]
			for _, s := range e.Addresses {
				if a, ok := endpointAddr(s, es.AddressType); ok {
					fn(e, tcbpf.Backend{IP: a, Port: port})
				}
			}
		}
	}
}

// sortedBackends sorts and drops duplicates (a backend given by two slices counts once).
func sortedBackends(bs []tcbpf.Backend) []tcbpf.Backend {
	slices.SortFunc(bs, tcbpf.CompareBackends)
	return slices.Compact(bs)
}

// UDPFrontends are a Service's UDP frontends (every address:port a client
// may reach it on: clusterIPs, node ports, external IPs) with the backends
// their flows may keep: every serving endpoint, whatever the traffic
// policies and the terminating state, as kube-proxy's conntrack cleanup
// (pkg/proxy/conntrack) reads them, so that a policy change never cuts a
// flow. A flow to any other backend is stale: its backend went away, or
// the target port changed.
func UDPFrontends(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, nodeIPs []netip.Addr) map[netip.AddrPort][]tcbpf.Backend {
	out := map[netip.AddrPort][]tcbpf.Backend{}
	eachPortKey(svc, nodeIPs, func(sp corev1.ServicePort, k svcsync.Key) {
		if sp.Protocol == corev1.ProtocolUDP {
			out[k.Frontend()] = servingBackends(sp, eps, k.VIP.Is6())
		}
	})
	return out
}

// AffinityPorts names the Service port each of svc's entries serves
// (svcsync.Ports: under sessionAffinity the frontends of one port share a
// client's memory, as kube-proxy's chains of a Service port share its
// recent lists); nil without sessionAffinity.
func AffinityPorts(svc *corev1.Service, nodeIPs []netip.Addr) svcsync.Ports {
	if SessionAffinity(svc) == 0 {
		return nil
	}
	out := svcsync.Ports{}
	eachPortKey(svc, nodeIPs, func(sp corev1.ServicePort, k svcsync.Key) {
		out[k] = fmt.Sprintf("%s/%s/%d", sp.Name, sp.Protocol, sp.Port)
	})
	return out
}

// eachPortKey calls fn with each Service port and each of its entries'
// keys (every address:port a client may reach it on: clusterIPs, node
// ports, external IPs), as the translators make them for that port alone.
func eachPortKey(svc *corev1.Service, nodeIPs []netip.Addr, fn func(corev1.ServicePort, svcsync.Key)) {
	for _, sp := range svc.Spec.Ports {
		one := *svc
		one.Spec.Ports = []corev1.ServicePort{sp}
		internal, _ := Translate(&one, nil, Node{})
		external, _ := TranslateExternal(&one, nil, Node{}, nodeIPs)
		for _, es := range []svcsync.Entries{internal, external} {
			for k := range es {
				fn(sp, k)
			}
		}
	}
}

// slicePort finds the slice's port for a Service port: same name, same
// protocol (the controller names slice ports after Service ports).
func slicePort(es *discoveryv1.EndpointSlice, sp corev1.ServicePort) (uint16, bool) {
	for _, p := range es.Ports {
		name, proto := "", corev1.ProtocolTCP
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		spProto := sp.Protocol
		if spProto == "" {
			spProto = corev1.ProtocolTCP
		}
		if name == sp.Name && proto == spProto && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}

// isTrue reads an optional condition; nil means def (the API says a nil
// ready condition is to be read as ready).
func isTrue(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// Package proxy is vnetlab's Kubernetes Service proxy (`vnetlab kube-proxy`),
// one per node in place of kube-proxy: client-go informers on Services and
// EndpointSlices, a pure translation of them into the entries of vnetlab's
// eBPF Service maps (this file), an incremental sync of those entries into
// the node's maps (internal/dataplane/servicemap's Syncer, servicemap.go),
// and the tc programs attached to every pod's
// node-side veth as the CNI makes it (links.go). docs/kubernetes-proxy.md
// says which Kubernetes semantics it implements.
package proxy

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vnetlab/vnetlab/internal/dataplane/tcbpf"
)

// Translate computes the entries of one Service on node `node` from the
// Service and its EndpointSlices, as kube-proxy does:
//   - one entry per clusterIP (IPv4) and port/protocol (TCP, UDP; SCTP is
//     skipped with a note); headless and ExternalName Services have none;
//   - a Service port's endpoints are those of the slice port with the same
//     name and protocol: the EndpointSlice controller resolved named
//     targetPorts per pod, so one Service port may have several numbers;
//   - only ready endpoints; if none is ready, the serving ones that are
//     terminating (kube-proxy's fallback), so a rollout never drops
//     connections it could serve;
//   - internalTrafficPolicy Local: only endpoints on this node (none: the
//     entry stays, without backends, and its clients are refused);
//   - a backend given twice (by two slices) counts once.
//
// Notes say what was skipped and why (one line each).
func Translate(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, node string) (Entries, []string) {
	var notes []string
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, nil
	}
	var vips []netip.Addr
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	for _, s := range ips {
		if s == corev1.ClusterIPNone {
			return nil, nil // headless: DNS names the pods, no proxying
		}
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			notes = append(notes, fmt.Sprintf("clusterIP %q skipped: the data plane is IPv4 only", s))
			continue
		}
		vips = append(vips, a)
	}
	if len(vips) == 0 {
		return nil, notes
	}
	local := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	out := Entries{}
	for _, sp := range svc.Spec.Ports {
		proto, ok := protoOf(sp.Protocol)
		if !ok {
			notes = append(notes, fmt.Sprintf("port %d/%s skipped: the data plane does TCP and UDP", sp.Port, sp.Protocol))
			continue
		}
		backends := backendsFor(sp, eps, node, local)
		for _, vip := range vips {
			out[Key{VIP: vip, Port: uint16(sp.Port), Proto: proto}] = backends
		}
	}
	return out, notes
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

// backendsFor collects one Service port's backends from the slices.
func backendsFor(sp corev1.ServicePort, eps []*discoveryv1.EndpointSlice, node string, local bool) []tcbpf.Backend {
	var ready, terminating []tcbpf.Backend
	for _, es := range eps {
		if es.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		port, ok := slicePort(es, sp)
		if !ok {
			continue
		}
		for _, e := range es.Endpoints {
			if local && (e.NodeName == nil || *e.NodeName != node) {
				continue
			}
			var into *[]tcbpf.Backend
			switch {
			case isTrue(e.Conditions.Ready, true):
				into = &ready
			case isTrue(e.Conditions.Serving, false) && isTrue(e.Conditions.Terminating, false):
				into = &terminating
			default:
				continue
			}
			for _, s := range e.Addresses {
				if a, err := netip.ParseAddr(s); err == nil && a.Is4() {
					*into = append(*into, tcbpf.Backend{IP: a, Port: port})
				}
			}
		}
	}
	if len(ready) == 0 {
		ready = terminating
	}
	slices.SortFunc(ready, tcbpf.CompareBackends)
	return slices.Compact(ready)
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

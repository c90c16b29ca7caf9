package proxy

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
)

// TranslateExternal computes the entries of a Service's frontends for
// traffic from outside the cluster, on node `node` whose addresses are
// nodeIPs (at most one per family), as kube-proxy does:
//   - node ports (type NodePort and LoadBalancer, whose ports get nodePorts
//     too): nodeIP:nodePort/proto per port with a nodePort and per node
//     address;
//   - external IPs (spec.externalIPs, any type but ExternalName): each
//     externalIP:port/proto, served on every node for traffic arriving
//     there, from its pods and from its own processes (nothing checks that
//     the address is the node's: the upstream e2e reaches one that is
//     nobody's);
//
// each with every endpoint of the frontend's family (ready, else serving
// and terminating), as the clusterIP's but whatever its
// internalTrafficPolicy (narrowed by the hints as the clusterIP's are). With externalTrafficPolicy Local each also gets an
// External entry holding this node's endpoints only, which the uplink's
// nodeport_in serves to clients outside the node (their address kept; none
// here: dropped, as kube-proxy drops). Pods and the node's own processes
// keep the entry with every endpoint, as kube-proxy's short-circuit sends
// them to any endpoint. A backend on another node is reached with SNAT to
// the node's address of its family (bpf/nodeport.h, nodeport6.h), as
// kube-proxy masquerades.
func TranslateExternal(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, at Node, nodeIPs []netip.Addr) (svcsync.Entries, []string) {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || isHeadless(svc) {
		return nil, nil
	}
	var notes []string
	var addrs []netip.Addr // the external IPs
	for _, s := range svc.Spec.ExternalIPs {
		a, ok := serviceAddr(s)
		if !ok {
			notes = append(notes, fmt.Sprintf("externalIP %q skipped: not an IP address", s))
			continue
		}
		addrs = append(addrs, a)
	}
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	out := svcsync.Entries{}
	for _, sp := range svc.Spec.Ports {
		var keys []svcsync.Key
		proto, ok := protoOf(sp.Protocol)
		if hasNodePorts(svc) && sp.NodePort != 0 && len(nodeIPs) > 0 {
			if !ok {
				notes = append(notes, fmt.Sprintf("nodePort %d/%s skipped: the data plane does TCP and UDP", sp.NodePort, sp.Protocol))
			} else {
				for _, ip := range nodeIPs {
					keys = append(keys, svcsync.Key{VIP: ip, Port: uint16(sp.NodePort), Proto: proto})
				}
			}
		}
		if ok {
			for _, a := range addrs {
				keys = append(keys, svcsync.Key{VIP: a, Port: uint16(sp.Port), Proto: proto})
			}
		}
		for _, k := range keys {
			v6 := k.VIP.Is6()
			out[k] = backendsFor(sp, eps, at, false, v6)
			if local {
				k.External = true
				out[k] = backendsFor(sp, eps, at, true, v6)
			}
		}
	}
	return out, notes
}

func hasNodePorts(svc *corev1.Service) bool {
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// HealthCheck says whether this node serves a health check for the
// Service (healthCheckNodePort: externalTrafficPolicy Local, the API sets
// it for type LoadBalancer) and how many of its endpoints are ready here:
// the number a load balancer reads to send traffic to this node or not.
func HealthCheck(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, node string) (port uint16, localEndpoints int) {
	if !hasNodePorts(svc) || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal ||
		svc.Spec.HealthCheckNodePort <= 0 || svc.Spec.HealthCheckNodePort > 65535 {
		return 0, 0
	}
	// One family's endpoints, the Service's primary one (a dual-stack pod
	// has an endpoint in each family's slice).
	v6 := len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	seen := map[string]bool{}
	for _, es := range eps {
		if !sliceOfFamily(es, v6) {
			continue
		}
		for _, e := range es.Endpoints {
			if e.NodeName == nil || *e.NodeName != node || !isTrue(e.Conditions.Ready, true) {
				continue
			}
			for _, a := range e.Addresses {
				seen[a] = true
			}
		}
	}
	return uint16(svc.Spec.HealthCheckNodePort), len(seen)
}

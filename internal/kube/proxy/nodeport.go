package proxy

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TranslateNodePorts computes a Service's NodePort entries on node `node`
// whose IP is nodeIP, as kube-proxy does: for type NodePort and
// LoadBalancer (whose ports get nodePorts too), one entry per port with a
// nodePort, keyed nodeIP:nodePort/proto (the data plane's uplink programs
// and the pods' from_pod look them up like clusterIPs). Its backends:
//   - externalTrafficPolicy Cluster: every endpoint (ready, else serving
//     and terminating), as the clusterIP's; one on another node is reached
//     with SNAT to the node IP (bpf/nodeport.h), as kube-proxy masquerades;
//   - externalTrafficPolicy Local: this node's endpoints only, the client's
//     address kept; none: the entry stays without backends and its packets
//     are dropped (kube-proxy drops them too).
func TranslateNodePorts(svc *corev1.Service, eps []*discoveryv1.EndpointSlice, node string, nodeIP netip.Addr) (Entries, []string) {
	if !nodeIP.Is4() || !hasNodePorts(svc) {
		return nil, nil
	}
	var notes []string
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	out := Entries{}
	for _, sp := range svc.Spec.Ports {
		if sp.NodePort == 0 {
			continue
		}
		proto, ok := protoOf(sp.Protocol)
		if !ok {
			notes = append(notes, fmt.Sprintf("nodePort %d/%s skipped: the data plane does TCP and UDP", sp.NodePort, sp.Protocol))
			continue
		}
		out[Key{VIP: nodeIP, Port: uint16(sp.NodePort), Proto: proto}] = backendsFor(sp, eps, node, local)
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
	seen := map[string]bool{}
	for _, es := range eps {
		if es.AddressType != discoveryv1.AddressTypeIPv4 {
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

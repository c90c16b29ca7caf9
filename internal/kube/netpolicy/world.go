package netpolicy

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// The cluster as the netpol model sees it: every namespace with its labels,
// every pod that has addresses on the pod network, and the policies. A pod
// of the host's network (hostNetwork) is no pod of the model: its addresses
// are its node's, and a policy never selects or names it; nor is a pod
// that has finished (Succeeded, Failed: its addresses may be another's
// now) or has no address yet (its update with one syncs again).

// modelPod is the model's pod for p, false when p is none of the model's.
func modelPod(p *corev1.Pod) (netpol.Pod, bool) {
	if p.Spec.HostNetwork || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return netpol.Pod{}, false
	}
	out := netpol.Pod{Name: p.Name, Namespace: p.Namespace, Labels: netpol.Labels(p.Labels)}
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out.IPs = append(out.IPs, a.Unmap())
		}
	}
	if len(out.IPs) == 0 {
		return netpol.Pod{}, false
	}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.Name == "" || port.ContainerPort < 1 || port.ContainerPort > 65535 {
				continue
			}
			proto := netpol.Proto(port.Protocol)
			if proto == "" {
				proto = netpol.TCP
			}
			out.Ports = append(out.Ports, netpol.NamedPort{Name: port.Name, Proto: proto, Port: uint16(port.ContainerPort)})
		}
	}
	return out, true
}

// modelPods are the model's pods of the cluster: those modelPod keeps
// (where two claim one address, the newer one that is not being deleted:
// the older's address was released and taken again before its object
// went). local lists the pods of node, by namespace/name: a node enforces
// the rules of its own pods (a packet between nodes meets its source's
// egress rules on the source's node and its destination's ingress rules on
// the destination's, as kube-router programs its nodes), with the whole
// cluster's pods as their peers.
func modelPods(pods map[string]*corev1.Pod, node string) ([]netpol.Pod, map[string]bool) {
	ordered := slices.Collect(maps.Values(pods))
	// Preferred first: not being deleted, then the newest.
	slices.SortFunc(ordered, func(a, b *corev1.Pod) int {
		if (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) {
			if a.DeletionTimestamp == nil {
				return -1
			}
			return 1
		}
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	taken := map[netip.Addr]bool{}
	local := map[string]bool{}
	var out []netpol.Pod
	for _, p := range ordered {
		mp, ok := modelPod(p)
		if !ok || slices.ContainsFunc(mp.IPs, func(a netip.Addr) bool { return taken[a] }) {
			continue
		}
		for _, a := range mp.IPs {
			taken[a] = true
		}
		out = append(out, mp)
		if p.Spec.NodeName == node {
			local[p.Namespace+"/"+p.Name] = true
		}
	}
	return out, local
}

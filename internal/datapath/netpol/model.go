// Package netpol is vnetlab's NetworkPolicy model, as data: pods with
// labels in namespaces with labels, and Kubernetes NetworkPolicy objects
// (k8s.io/api/networking/v1, read from their YAML) that select them. It
// holds the reference semantics (World.Allowed: may a new connection from
// one address to another, on a protocol and port, start?) and the compiler
// (Compile: the model resolved to per-pod rule sets of addresses and port
// ranges) that a provider realises; a provider never reads a selector. Tests
// of every provider compare the traffic it lets through with World.Allowed.
//
// The semantics are Kubernetes' (docs/policies.md):
//   - a pod is isolated for ingress (egress) when a policy of its namespace
//     selects it and has that direction among its policy types; an isolated
//     pod accepts (sends) only what some rule of such a policy allows, the
//     union of all of them; a pod no policy selects is not isolated;
//   - a connection needs both ends: the source's egress and the
//     destination's ingress; replies of an allowed connection always pass;
//   - a pod reaching its own address is always allowed (it never leaves the pod).
package netpol

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Proto is a policy port's protocol, spelled as Kubernetes spells it.
type Proto string

// The protocols a NetworkPolicy port may name.
const (
	TCP  Proto = Proto(corev1.ProtocolTCP)
	UDP  Proto = Proto(corev1.ProtocolUDP)
	SCTP Proto = Proto(corev1.ProtocolSCTP)
)

// Protos are the protocols the model knows, in order.
var Protos = []Proto{TCP, UDP, SCTP}

// Number is the protocol's IP protocol number.
func (p Proto) Number() uint8 {
	switch p {
	case TCP:
		return 6
	case UDP:
		return 17
	case SCTP:
		return 132
	}
	return 0
}

// Lower is the protocol as nft and iptables write it ("tcp").
func (p Proto) Lower() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return string(p)
}

// DefaultNamespace is where a pod or a policy without a namespace lives.
const DefaultNamespace = "default"

// Labels are an object's labels.
type Labels map[string]string

// Namespace is a namespace and its labels; every namespace also carries
// kubernetes.io/metadata.name (its name), as the API server sets it.
type Namespace struct {
	Name   string `json:"name"`
	Labels Labels `json:"labels,omitempty"`
}

// Pod is a pod of the model: its name and namespace, labels, addresses and
// named ports (its containers' ports that have a name).
type Pod struct {
	Name      string       `json:"name"`
	Namespace string       `json:"namespace"`
	Labels    Labels       `json:"labels,omitempty"`
	IPs       []netip.Addr `json:"ips"`
	Ports     []NamedPort  `json:"ports,omitempty"`
}

// NamedPort is a container port with a name, which a policy port may give
// instead of a number.
type NamedPort struct {
	Name  string `json:"name"`
	Proto Proto  `json:"proto"`
	Port  uint16 `json:"port"`
}

// World is the model: namespaces, pods and the policies in force. A pod's
// namespace that Namespaces does not list exists with no labels but its
// name's.
type World struct {
	Namespaces []Namespace
	Pods       []Pod
	Policies   []networkingv1.NetworkPolicy
	memo       *memo // during a compilation (eval.go)
}

// NamespaceLabels are the labels of namespace ns, with its name's label.
func (w *World) NamespaceLabels(ns string) Labels {
	out := Labels{corev1.LabelMetadataName: ns}
	for _, n := range w.Namespaces {
		if n.Name == ns {
			for k, v := range n.Labels {
				out[k] = v
			}
		}
	}
	return out
}

// PodAt is the pod holding address a, nil when no pod does.
func (w *World) PodAt(a netip.Addr) *Pod {
	return holding(w.Pods, func(p *Pod) []netip.Addr { return p.IPs }, a)
}

// holding is the element of xs whose addresses (ips) hold a, nil when none does.
func holding[T any](xs []T, ips func(*T) []netip.Addr, a netip.Addr) *T {
	for i := range xs {
		if slices.Contains(ips(&xs[i]), a) {
			return &xs[i]
		}
	}
	return nil
}

// Pod is the pod named name in namespace ns, nil when there is none.
func (w *World) Pod(ns, name string) *Pod {
	for i := range w.Pods {
		if w.Pods[i].Namespace == ns && w.Pods[i].Name == name {
			return &w.Pods[i]
		}
	}
	return nil
}

// namedPort is the number of pod p's port named name on protocol proto.
func (p *Pod) namedPort(name string, proto Proto) (uint16, bool) {
	for _, np := range p.Ports {
		if np.Name == name && np.Proto == proto {
			return np.Port, true
		}
	}
	return 0, false
}

// Types says which directions a policy governs: its policyTypes, or when it
// gives none, Ingress always and Egress when it has egress rules (as the
// API server defaults them).
func Types(p *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(p.Spec.PolicyTypes) == 0 {
		return true, len(p.Spec.Egress) > 0
	}
	for _, t := range p.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// policyNamespace is a policy's namespace (DefaultNamespace when unset).
func policyNamespace(p *networkingv1.NetworkPolicy) string {
	if p.Namespace == "" {
		return DefaultNamespace
	}
	return p.Namespace
}

// protoOf is a policy port's protocol (TCP when unset).
func protoOf(pp networkingv1.NetworkPolicyPort) Proto {
	if pp.Protocol == nil {
		return TCP
	}
	return Proto(*pp.Protocol)
}

// WithoutProto is policy p with its ports of protocol proto taken out, for
// an enforcer that cannot match that protocol: a rule that named only such
// ports then matches nothing (it never becomes a rule of every port), and
// the policy keeps its directions (its policyTypes written out), so it
// still isolates the pods it selects. Fields names each port taken out
// (spec.ingress[0].ports[1]); none: p itself.
func WithoutProto(p *networkingv1.NetworkPolicy, proto Proto) (q *networkingv1.NetworkPolicy, fields []string) {
	q = p.DeepCopy()
	in, eg := Types(p)
	q.Spec.PolicyTypes = nil
	if in {
		q.Spec.PolicyTypes = append(q.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
	}
	if eg {
		q.Spec.PolicyTypes = append(q.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	}
	strip := func(at string, ports []networkingv1.NetworkPolicyPort) ([]networkingv1.NetworkPolicyPort, bool) {
		var kept []networkingv1.NetworkPolicyPort
		for i, pp := range ports {
			if protoOf(pp) == proto {
				fields = append(fields, fmt.Sprintf("%s.ports[%d]", at, i))
				continue
			}
			kept = append(kept, pp)
		}
		return kept, len(ports) > 0 && len(kept) == 0
	}
	ingress := keepRules(q.Spec.Ingress, "spec.ingress", func(r *networkingv1.NetworkPolicyIngressRule) *[]networkingv1.NetworkPolicyPort { return &r.Ports }, strip)
	egress := keepRules(q.Spec.Egress, "spec.egress", func(r *networkingv1.NetworkPolicyEgressRule) *[]networkingv1.NetworkPolicyPort { return &r.Ports }, strip)
	if len(fields) == 0 {
		return p, nil
	}
	q.Spec.Ingress, q.Spec.Egress = ingress, egress
	return q, fields
}

// keepRules is rules (an ingress or egress list, named at) with each rule's
// ports passed through strip; a rule left with no port is dropped.
func keepRules[R any](rules []R, at string, ports func(*R) *[]networkingv1.NetworkPolicyPort,
	strip func(string, []networkingv1.NetworkPolicyPort) ([]networkingv1.NetworkPolicyPort, bool)) []R {
	var kept []R
	for i, r := range rules {
		pp, none := strip(fmt.Sprintf("%s[%d]", at, i), *ports(&r))
		if !none {
			*ports(&r) = pp
			kept = append(kept, r)
		}
	}
	return kept
}

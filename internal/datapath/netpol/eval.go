package netpol

import (
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The reference semantics, read straight from the policies' selectors (no
// compiled form): what every provider's traffic is compared with.

// Allowed says whether a new connection (its first packet) from address src
// to address dst on proto and port may start. Either end may be a pod or
// an address outside the pods (matched only by ipBlock peers).
func (w *World) Allowed(src, dst netip.Addr, proto Proto, port uint16) bool {
	sp, dp := w.PodAt(src), w.PodAt(dst)
	if sp != nil && sp == dp {
		return true
	}
	return w.egressAllowed(sp, dst, dp, proto, port) && w.ingressAllowed(dp, src, sp, proto, port)
}

// Selects says whether policy p selects pod.
func Selects(p *networkingv1.NetworkPolicy, pod *Pod) bool {
	return policyNamespace(p) == pod.Namespace && selectorMatches(&p.Spec.PodSelector, pod.Labels)
}

// IsolatedFor says whether pod is isolated for ingress (egress false) or
// egress: some policy of either direction selects it.
func (w *World) IsolatedFor(pod *Pod, egress bool) bool {
	for i := range w.Policies {
		p := &w.Policies[i]
		in, eg := Types(p)
		if (egress && eg || !egress && in) && Selects(p, pod) {
			return true
		}
	}
	return false
}

// ingressAllowed: dst pod dp (nil: not a pod) accepts from src (pod sp or nil).
func (w *World) ingressAllowed(dp *Pod, src netip.Addr, sp *Pod, proto Proto, port uint16) bool {
	if dp == nil {
		return true
	}
	isolated := false
	for i := range w.Policies {
		p := &w.Policies[i]
		if in, _ := Types(p); !in || !Selects(p, dp) {
			continue
		}
		isolated = true
		for _, r := range p.Spec.Ingress {
			if w.peersMatch(policyNamespace(p), r.From, src, sp) && portsMatch(r.Ports, proto, port, dp) {
				return true
			}
		}
	}
	return !isolated
}

// egressAllowed: src pod sp (nil: not a pod) may send to dst (pod dp or nil);
// a named port is the destination pod's.
func (w *World) egressAllowed(sp *Pod, dst netip.Addr, dp *Pod, proto Proto, port uint16) bool {
	if sp == nil {
		return true
	}
	isolated := false
	for i := range w.Policies {
		p := &w.Policies[i]
		if _, eg := Types(p); !eg || !Selects(p, sp) {
			continue
		}
		isolated = true
		for _, r := range p.Spec.Egress {
			if w.peersMatch(policyNamespace(p), r.To, dst, dp) && portsMatch(r.Ports, proto, port, dp) {
				return true
			}
		}
	}
	return !isolated
}

// peersMatch: no peers match every address; else any peer matching.
func (w *World) peersMatch(ns string, peers []networkingv1.NetworkPolicyPeer, a netip.Addr, pod *Pod) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		if w.peerMatches(ns, peer, a, pod) {
			return true
		}
	}
	return false
}

// peerMatches: an ipBlock matches addresses (pods' too); selectors match
// pods only: podSelector alone in the policy's namespace, namespaceSelector
// alone every pod of the namespaces it selects, both the pods of those
// namespaces that podSelector selects.
func (w *World) peerMatches(ns string, peer networkingv1.NetworkPolicyPeer, a netip.Addr, pod *Pod) bool {
	if peer.IPBlock != nil {
		return blockContains(peer.IPBlock, a)
	}
	if pod == nil || peer.PodSelector == nil && peer.NamespaceSelector == nil {
		return false
	}
	if peer.NamespaceSelector == nil {
		if pod.Namespace != ns {
			return false
		}
	} else if !w.matches(peer.NamespaceSelector, w.namespaceSet(pod.Namespace)) {
		return false
	}
	return peer.PodSelector == nil || w.matches(peer.PodSelector, labels.Set(pod.Labels))
}

// blockContains: a is in the block's cidr and in none of its excepts.
func blockContains(b *networkingv1.IPBlock, a netip.Addr) bool {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !cidr.Masked().Contains(a) {
		return false
	}
	for _, e := range b.Except {
		if ex, err := netip.ParsePrefix(e); err == nil && ex.Masked().Contains(a) {
			return false
		}
	}
	return true
}

// portsMatch: no ports match every protocol and port; else any matching.
// A named port is looked up on target (the connection's destination pod).
func portsMatch(ports []networkingv1.NetworkPolicyPort, proto Proto, port uint16, target *Pod) bool {
	if len(ports) == 0 {
		return true
	}
	for _, pp := range ports {
		if portMatches(pp, proto, port, target) {
			return true
		}
	}
	return false
}

func portMatches(pp networkingv1.NetworkPolicyPort, proto Proto, port uint16, target *Pod) bool {
	if protoOf(pp) != proto {
		return false
	}
	if pp.Port == nil {
		return true
	}
	if pp.Port.Type == intstr.String {
		if target == nil {
			return false
		}
		n, ok := target.namedPort(pp.Port.StrVal, proto)
		return ok && n == port
	}
	first, last := int32(pp.Port.IntVal), int32(pp.Port.IntVal)
	if pp.EndPort != nil {
		last = *pp.EndPort
	}
	return int32(port) >= first && int32(port) <= last
}

// selectorMatches: an empty selector matches everything, a bad one nothing
// (Check refuses bad selectors before any of this runs).
func selectorMatches(sel *metav1.LabelSelector, l Labels) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(l))
}

// memo holds what a compilation asks again and again of a world that does
// not change meanwhile: each selector parsed once (parsing validates every
// key and value: most of the time a compilation of many policies takes
// otherwise), each namespace's labels gathered once.
type memo struct {
	selectors map[*metav1.LabelSelector]labels.Selector
	namespace map[string]labels.Set
}

// matches is selectorMatches, through the world's memo when it has one.
func (w *World) matches(sel *metav1.LabelSelector, l labels.Set) bool {
	if w.memo == nil {
		return selectorMatches(sel, Labels(l))
	}
	if len(sel.MatchExpressions) == 0 {
		// Labels alone are matched as they are: Check (or the API server)
		// validated them, and parsing them again costs a compilation of
		// many policies most of its time.
		for k, v := range sel.MatchLabels {
			if got, ok := l[k]; !ok || got != v {
				return false
			}
		}
		return true
	}
	s, ok := w.memo.selectors[sel]
	if !ok {
		var err error
		if s, err = metav1.LabelSelectorAsSelector(sel); err != nil {
			s = labels.Nothing()
		}
		w.memo.selectors[sel] = s
	}
	return s.Matches(l)
}

// namespaceSet is NamespaceLabels, through the world's memo when it has one.
func (w *World) namespaceSet(ns string) labels.Set {
	if w.memo == nil {
		return labels.Set(w.NamespaceLabels(ns))
	}
	l, ok := w.memo.namespace[ns]
	if !ok {
		l = labels.Set(w.NamespaceLabels(ns))
		w.memo.namespace[ns] = l
	}
	return l
}

// selects is Selects through the world's memo.
func (w *World) selects(p *networkingv1.NetworkPolicy, pod *Pod) bool {
	return policyNamespace(p) == pod.Namespace && w.matches(&p.Spec.PodSelector, labels.Set(pod.Labels))
}

package netpol

import (
	"net/netip"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The compiled form: what a provider realises. Every selector is resolved
// to the addresses of the pods it selects and every named port to numbers,
// per pod and direction; a provider writes these sets and ranges as it
// likes (nft sets and verdict maps, ipsets, eBPF maps) without reading a
// selector.

// Rules are the compiled policies: one entry per pod of the world, sorted
// by namespace and name.
type Rules struct {
	Pods []PodRules
}

// PodRules is what governs one pod's traffic.
type PodRules struct {
	Pod       string
	Namespace string
	IPs       []netip.Addr
	// Ingress is what may reach the pod; Egress what it may send.
	Ingress, Egress Side
}

// Side is one direction of a pod: not isolated (everything passes), or
// isolated and then only what one of Allow matches passes. An Allow is
// shared by every pod its rule gives it to and by every version of their
// rules (a change copies a pod's pointers, not its Allows): read Allows,
// never write them.
type Side struct {
	Isolated bool
	Allow    []*Allow
}

// Allow is one rule, compiled: the peer (the source for ingress, the
// destination for egress) must match Pods or Blocks (or AnyPeer), and the
// protocol and port one of Ports (or AnyPort).
type Allow struct {
	AnyPeer bool         `json:"any_peer,omitempty"`
	Pods    []netip.Addr `json:"pods,omitempty"`
	Blocks  []Block      `json:"blocks,omitempty"`
	AnyPort bool         `json:"any_port,omitempty"`
	Ports   []PortRange  `json:"ports,omitempty"`
	// key is Hash, stored by sealed (0: not stored).
	key uint64
}

// Block is an ipBlock: CIDR except the Except prefixes (each inside it).
type Block struct {
	CIDR   netip.Prefix   `json:"cidr"`
	Except []netip.Prefix `json:"except,omitempty"`
}

// PortRange is a protocol and an inclusive range of ports (0-65535: every
// port of the protocol).
type PortRange struct {
	Proto Proto  `json:"proto"`
	First uint16 `json:"first"`
	Last  uint16 `json:"last"`
}

// Compile resolves w's policies to per-pod rules. w should have passed
// Check (a bad selector's effect here is undefined).
func Compile(w *World) Rules { return CompileWhere(w, nil) }

// CompileWhere is Compile for the pods keep keeps (nil: every pod), as a
// node that enforces the rules of its own pods needs them; the peers of
// their rules are still every pod of w.
func CompileWhere(w *World, keep func(*Pod) bool) Rules {
	w.memo = &memo{selectors: map[*metav1.LabelSelector]labels.Selector{}, namespace: map[string]labels.Set{}}
	defer func() { w.memo = nil }()
	var out Rules
	var pods []Pod
	for i := range w.Pods {
		if keep == nil || keep(&w.Pods[i]) {
			pods = append(pods, w.Pods[i])
		}
	}
	slices.SortFunc(pods, func(a, b Pod) int {
		if a.Namespace != b.Namespace {
			if a.Namespace < b.Namespace {
				return -1
			}
			return 1
		}
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	for i := range pods {
		pod := &pods[i]
		pr := PodRules{Pod: pod.Name, Namespace: pod.Namespace, IPs: slices.Clone(pod.IPs)}
		for j := range w.Policies {
			p := &w.Policies[j]
			if !w.selects(p, pod) {
				continue
			}
			in, eg := Types(p)
			ns := policyNamespace(p)
			if in {
				pr.Ingress.Isolated = true
				for _, r := range p.Spec.Ingress {
					f := w.resolveRule(ns, r.From, r.Ports, false)
					pr.Ingress.Allow = append(pr.Ingress.Allow, f.allows(pod)...)
				}
			}
			if eg {
				pr.Egress.Isolated = true
				for _, r := range p.Spec.Egress {
					f := w.resolveRule(ns, r.To, r.Ports, true)
					pr.Egress.Allow = append(pr.Egress.Allow, f.allows(pod)...)
				}
			}
		}
		out.Pods = append(out.Pods, pr)
	}
	return out
}

// ruleForm is one ingress or egress rule of a policy with its peers
// resolved against the world's pods: what it allows whichever pod the
// policy selects, but for its named ports on ingress, which are the
// selected pod's own (allows). A named port on egress is each destination
// pod's, so such ports become one Allow per pod that has them (a
// destination that is no pod has no named port).
type ruleForm struct {
	// base: the peers, and the numeric ports merged.
	base Allow
	// named are the ingress ports given by name.
	named []networkingv1.NetworkPolicyPort
	// fixed are the rule's Allows when named is empty.
	fixed []*Allow
}

// resolveRule resolves one rule of a policy in namespace ns against w's
// pods.
func (w *World) resolveRule(ns string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, egress bool) ruleForm {
	base := Allow{AnyPeer: len(peers) == 0, AnyPort: len(ports) == 0}
	for _, peer := range peers {
		if peer.IPBlock != nil {
			base.Blocks = append(base.Blocks, compileBlock(peer.IPBlock))
			continue
		}
		for i := range w.Pods {
			if w.peerMatches(ns, peer, netip.Addr{}, &w.Pods[i]) {
				base.Pods = append(base.Pods, w.Pods[i].IPs...)
			}
		}
	}
	base.Pods = sortedUnique(base.Pods)
	var named, egNamed []networkingv1.NetworkPolicyPort
	for _, pp := range ports {
		switch {
		case pp.Port == nil:
			base.Ports = append(base.Ports, PortRange{Proto: protoOf(pp), First: 0, Last: 65535})
		case pp.Port.Type == intstr.Int:
			last := pp.Port.IntVal
			if pp.EndPort != nil {
				last = *pp.EndPort
			}
			base.Ports = append(base.Ports, PortRange{Proto: protoOf(pp), First: uint16(pp.Port.IntVal), Last: uint16(last)})
		case !egress:
			named = append(named, pp)
		default:
			egNamed = append(egNamed, pp)
		}
	}
	base.Ports = mergePorts(base.Ports)
	f := ruleForm{base: base, named: named}
	if len(named) == 0 && base.peers() && (base.AnyPort || len(base.Ports) > 0) {
		b := base
		f.fixed = append(f.fixed, sealed(&b))
	}
	if len(egNamed) == 0 {
		return f
	}
	for i := range w.Pods {
		dst := &w.Pods[i]
		var ips []netip.Addr
		for _, a := range dst.IPs {
			if base.peerMatches(a) {
				ips = append(ips, a)
			}
		}
		var pr []PortRange
		for _, pp := range egNamed {
			if n, ok := dst.namedPort(pp.Port.StrVal, protoOf(pp)); ok {
				pr = append(pr, PortRange{Proto: protoOf(pp), First: n, Last: n})
			}
		}
		if len(ips) > 0 && len(pr) > 0 {
			f.fixed = append(f.fixed, sealed(&Allow{Pods: sortedUnique(ips), Ports: mergePorts(pr)}))
		}
	}
	return f
}

// allows are the rule's Allows for the pod owner its policy selects. The
// slices are shared by every pod the rule's Allows do not depend on: read
// them, never write them.
func (f *ruleForm) allows(owner *Pod) []*Allow {
	if len(f.named) == 0 {
		return f.fixed
	}
	b := f.base
	b.Ports = slices.Clone(f.base.Ports)
	for _, pp := range f.named {
		if n, ok := owner.namedPort(pp.Port.StrVal, protoOf(pp)); ok {
			b.Ports = append(b.Ports, PortRange{Proto: protoOf(pp), First: n, Last: n})
		}
	}
	b.Ports = mergePorts(b.Ports)
	if b.peers() && (b.AnyPort || len(b.Ports) > 0) {
		return []*Allow{sealed(&b)}
	}
	return nil
}

// peers says whether the Allow can match any address at all.
func (a Allow) peers() bool { return a.AnyPeer || len(a.Pods) > 0 || len(a.Blocks) > 0 }

func compileBlock(b *networkingv1.IPBlock) Block {
	cidr, _ := netip.ParsePrefix(b.CIDR)
	out := Block{CIDR: cidr.Masked()}
	for _, e := range b.Except {
		if ex, err := netip.ParsePrefix(e); err == nil {
			out.Except = append(out.Except, ex.Masked())
		}
	}
	out.Except = outermost(out.Except)
	return out
}

// outermost drops the prefixes another one of the list covers (and
// duplicates), so a provider's interval set holds no overlap.
func outermost(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if a.Bits() != b.Bits() {
			return a.Bits() - b.Bits()
		}
		return a.Addr().Compare(b.Addr())
	})
	var out []netip.Prefix
	for _, p := range ps {
		if !slices.ContainsFunc(out, func(q netip.Prefix) bool { return q.Contains(p.Addr()) }) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return out
}

// mergePorts sorts port ranges by protocol and start and merges those that
// overlap or touch (nft refuses overlapping elements of an interval set).
func mergePorts(rs []PortRange) []PortRange {
	slices.SortFunc(rs, func(a, b PortRange) int {
		if a.Proto != b.Proto {
			return slices.Index(Protos, a.Proto) - slices.Index(Protos, b.Proto)
		}
		return int(a.First) - int(b.First)
	})
	var out []PortRange
	for _, r := range rs {
		if n := len(out); n > 0 && out[n-1].Proto == r.Proto && int(r.First) <= int(out[n-1].Last)+1 {
			out[n-1].Last = max(out[n-1].Last, r.Last)
			continue
		}
		out = append(out, r)
	}
	return out
}

func sortedUnique(a []netip.Addr) []netip.Addr {
	slices.SortFunc(a, netip.Addr.Compare)
	return slices.Compact(a)
}

// Contains says whether the block holds address a.
func (b Block) Contains(a netip.Addr) bool {
	if !b.CIDR.Contains(a) {
		return false
	}
	for _, e := range b.Except {
		if e.Contains(a) {
			return false
		}
	}
	return true
}

// peerMatches: the Allow's peers hold address a.
func (a Allow) peerMatches(addr netip.Addr) bool {
	if a.AnyPeer || slices.Contains(a.Pods, addr) {
		return true
	}
	for _, b := range a.Blocks {
		if b.Contains(addr) {
			return true
		}
	}
	return false
}

// Matches says whether the Allow lets a connection with peer address addr
// on proto and port through.
func (a Allow) Matches(addr netip.Addr, proto Proto, port uint16) bool {
	if !a.peerMatches(addr) {
		return false
	}
	if a.AnyPort {
		return true
	}
	for _, r := range a.Ports {
		if r.Proto == proto && port >= r.First && port <= r.Last {
			return true
		}
	}
	return false
}

// Admits says whether the side lets a connection with peer addr through.
func (s Side) Admits(addr netip.Addr, proto Proto, port uint16) bool {
	if !s.Isolated {
		return true
	}
	for _, a := range s.Allow {
		if a.Matches(addr, proto, port) {
			return true
		}
	}
	return false
}

// At is the pod rules of the pod holding address a, nil when none does.
func (r *Rules) At(a netip.Addr) *PodRules {
	return holding(r.Pods, func(p *PodRules) []netip.Addr { return p.IPs }, a)
}

// Allowed is World.Allowed computed from the compiled rules (tests hold
// the two equal; a provider realises this).
func (r *Rules) Allowed(src, dst netip.Addr, proto Proto, port uint16) bool {
	sp, dp := r.At(src), r.At(dst)
	if sp != nil && sp == dp {
		return true
	}
	if sp != nil && !sp.Egress.Admits(dst, proto, port) {
		return false
	}
	return dp == nil || dp.Ingress.Admits(src, proto, port)
}

// Isolated lists the addresses of the pods isolated on the side (egress
// true: Egress), for a provider's set of the pods it must look at.
func (r *Rules) Isolated(egress bool) []netip.Addr {
	var out []netip.Addr
	for _, p := range r.Pods {
		if egress && p.Egress.Isolated || !egress && p.Ingress.Isolated {
			out = append(out, p.IPs...)
		}
	}
	return out
}

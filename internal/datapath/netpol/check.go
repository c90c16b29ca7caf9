package netpol

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Check refuses a world a provider could not realise faithfully, with one
// line naming the object, the field and the fix: a malformed selector or
// CIDR, an except outside its ipBlock, a port range ending below its start,
// a named port no pod has, an unknown protocol or policy type, two pods on
// one address, two policies of one name.
func Check(w *World) error {
	seen := map[netip.Addr]string{}
	for _, ns := range w.Namespaces {
		if err := checkName("namespace", "", ns.Name, validation.IsDNS1123Label); err != nil {
			return err
		}
	}
	for _, p := range w.Pods {
		if err := checkName("pod", p.Namespace, p.Name, validation.IsDNS1123Subdomain); err != nil {
			return err
		}
		who := "pod " + p.Namespace + "/" + p.Name
		if len(p.IPs) == 0 {
			return fmt.Errorf("%s has no address", who)
		}
		for _, a := range p.IPs {
			if o, dup := seen[a]; dup {
				return fmt.Errorf("%s and %s both have address %s", o, who, a)
			}
			seen[a] = who
		}
		names := map[string]bool{}
		for _, np := range p.Ports {
			if errs := validation.IsValidPortName(np.Name); len(errs) > 0 {
				return fmt.Errorf("%s: port name %q: %s", who, np.Name, strings.Join(errs, "; "))
			}
			if names[np.Name] {
				return fmt.Errorf("%s: two ports named %q: give each port its own name", who, np.Name)
			}
			names[np.Name] = true
			if np.Port == 0 {
				return fmt.Errorf("%s: port %s has no containerPort from 1 to 65535", who, np.Name)
			}
			if err := checkProto(np.Proto); err != nil {
				return fmt.Errorf("%s: port %s: %w", who, np.Name, err)
			}
		}
	}
	names := map[string]bool{}
	for i := range w.Policies {
		p := &w.Policies[i]
		id := PolicyKey(p)
		if p.Name == "" {
			return fmt.Errorf("policy %d (namespace %s) has no metadata.name: give each policy a name", i+1, policyNamespace(p))
		}
		if names[id] {
			return fmt.Errorf("two policies named %s: give each its own name", id)
		}
		names[id] = true
		if err := w.CheckPolicy(p); err != nil {
			return err
		}
	}
	return nil
}

// CheckPolicy is Check's refusal of one policy p against w's pods and
// namespaces (w's policies are not looked at): what a change adding or
// replacing p checks, when the pods and namespaces are those Check passed.
func (w *World) CheckPolicy(p *networkingv1.NetworkPolicy) error {
	if p.Name == "" {
		return fmt.Errorf("a policy in namespace %s has no metadata.name: give each policy a name", policyNamespace(p))
	}
	if err := checkName("policy", policyNamespace(p), p.Name, validation.IsDNS1123Subdomain); err != nil {
		return err
	}
	if err := w.checkPolicy(p); err != nil {
		return fmt.Errorf("policy %s: %w", PolicyKey(p), err)
	}
	return nil
}

func (w *World) checkPolicy(p *networkingv1.NetworkPolicy) error {
	if err := checkSelector("spec.podSelector", &p.Spec.PodSelector); err != nil {
		return err
	}
	for i, t := range p.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			return fmt.Errorf("spec.policyTypes[%d] %q: use Ingress or Egress", i, t)
		}
	}
	for i, r := range p.Spec.Ingress {
		if err := w.checkRule(fmt.Sprintf("spec.ingress[%d]", i), "from", r.From, r.Ports); err != nil {
			return err
		}
	}
	for i, r := range p.Spec.Egress {
		if err := w.checkRule(fmt.Sprintf("spec.egress[%d]", i), "to", r.To, r.Ports); err != nil {
			return err
		}
	}
	return nil
}

func (w *World) checkRule(at, peersKey string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) error {
	for i, peer := range peers {
		f := fmt.Sprintf("%s.%s[%d]", at, peersKey, i)
		if peer.IPBlock != nil {
			if peer.PodSelector != nil || peer.NamespaceSelector != nil {
				return fmt.Errorf("%s: ipBlock goes alone: put the selectors in a peer of their own", f)
			}
			if err := checkBlock(f+".ipBlock", peer.IPBlock); err != nil {
				return err
			}
			continue
		}
		if peer.PodSelector == nil && peer.NamespaceSelector == nil {
			return fmt.Errorf("%s is empty: give podSelector, namespaceSelector or ipBlock (or leave out %s to match every peer)", f, peersKey)
		}
		if err := checkSelector(f+".podSelector", peer.PodSelector); err != nil {
			return err
		}
		if err := checkSelector(f+".namespaceSelector", peer.NamespaceSelector); err != nil {
			return err
		}
	}
	for i, pp := range ports {
		if err := w.checkPort(fmt.Sprintf("%s.ports[%d]", at, i), pp); err != nil {
			return err
		}
	}
	return nil
}

func checkSelector(f string, sel *metav1.LabelSelector) error {
	if sel == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return fmt.Errorf("%s: %v", f, err)
	}
	return nil
}

func checkBlock(f string, b *networkingv1.IPBlock) error {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return fmt.Errorf("%s.cidr %q is not a CIDR (example: 10.0.0.0/16 or fd00::/64)", f, b.CIDR)
	}
	cidr = cidr.Masked()
	for i, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("%s.except[%d] %q is not a CIDR (example: 10.0.1.0/24)", f, i, e)
		}
		if ex.Addr().Is4() != cidr.Addr().Is4() || ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()) {
			return fmt.Errorf("%s.except[%d] %s is outside its cidr %s: an except must be a smaller block inside the cidr", f, i, e, cidr)
		}
	}
	return nil
}

func (w *World) checkPort(f string, pp networkingv1.NetworkPolicyPort) error {
	proto := protoOf(pp)
	if err := checkProto(proto); err != nil {
		return fmt.Errorf("%s.protocol: %w", f, err)
	}
	if pp.Port == nil {
		if pp.EndPort != nil {
			return fmt.Errorf("%s.endPort needs a port to start the range", f)
		}
		return nil
	}
	if pp.Port.Type == intstr.String {
		name := pp.Port.StrVal
		if errs := validation.IsValidPortName(name); len(errs) > 0 {
			return fmt.Errorf("%s.port %q: %s", f, name, strings.Join(errs, "; "))
		}
		if pp.EndPort != nil {
			return fmt.Errorf("%s.endPort needs a numeric port, not the named port %q", f, name)
		}
		for _, pod := range w.Pods {
			if _, ok := pod.namedPort(name, proto); ok {
				return nil
			}
		}
		return fmt.Errorf("%s.port: no pod has a %s port named %q (pods' named ports: %s)", f, proto, name, w.namedPortList())
	}
	if pp.Port.IntVal < 1 || pp.Port.IntVal > 65535 {
		return fmt.Errorf("%s.port %d: a port is 1-65535", f, pp.Port.IntVal)
	}
	if pp.EndPort != nil && (*pp.EndPort < pp.Port.IntVal || *pp.EndPort > 65535) {
		return fmt.Errorf("%s.endPort %d is below port %d: give an endPort from %d to 65535", f, *pp.EndPort, pp.Port.IntVal, pp.Port.IntVal)
	}
	return nil
}

func checkProto(p Proto) error {
	if !slices.Contains(Protos, p) {
		return fmt.Errorf("unknown protocol %q: use TCP, UDP or SCTP", p)
	}
	return nil
}

// namedPortList lists the pods' named ports for an error ("none" when none).
func (w *World) namedPortList() string {
	var out []string
	for _, pod := range w.Pods {
		for _, np := range pod.Ports {
			s := fmt.Sprintf("%s/%s", np.Name, np.Proto)
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return "none"
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// Uses says whether any policy names protocol p (a provider refuses one
// its kernel lacks).
func (w *World) Uses(p Proto) bool {
	return slices.ContainsFunc(w.Policies, func(pol networkingv1.NetworkPolicy) bool { return PolicyUses(&pol, p) })
}

// PolicyUses says whether policy pol names protocol p.
func PolicyUses(pol *networkingv1.NetworkPolicy, p Proto) bool {
	for _, r := range pol.Spec.Ingress {
		for _, pp := range r.Ports {
			if protoOf(pp) == p {
				return true
			}
		}
	}
	for _, r := range pol.Spec.Egress {
		for _, pp := range r.Ports {
			if protoOf(pp) == p {
				return true
			}
		}
	}
	return false
}

// checkName refuses an object's name (and its namespace's, unless
// namespace is "") that the API server would: valid is the name's rule
// (a namespace's is a DNS-1123 label, a pod's and a policy's a subdomain).
func checkName(kind, namespace, name string, valid func(string) []string) error {
	if namespace != "" {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			return fmt.Errorf("%s %q: namespace %q: %s", kind, name, namespace, strings.Join(errs, "; "))
		}
	}
	if errs := valid(name); len(errs) > 0 {
		return fmt.Errorf("%s %q: metadata.name: %s", kind, name, strings.Join(errs, "; "))
	}
	return nil
}

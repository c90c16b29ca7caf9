package netpoltest

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// The parts of a policy: selectors, peers, ports and ipBlocks.

var ops = []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}

// selector over keys: empty (everything), matchLabels, matchExpressions
// (In, NotIn, Exists, DoesNotExist) or both.
func (g *Gen) selector(keys []string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{}
	kind := g.rng.IntN(4)
	if kind&1 != 0 {
		s.MatchLabels = map[string]string{}
		for range 1 + g.rng.IntN(2) {
			k := g.pick(keys)
			s.MatchLabels[k] = g.value(k)
		}
	}
	if kind&2 != 0 {
		for range 1 + g.rng.IntN(2) {
			k := g.pick(keys)
			e := metav1.LabelSelectorRequirement{Key: k, Operator: ops[g.rng.IntN(len(ops))]}
			if e.Operator == metav1.LabelSelectorOpIn || e.Operator == metav1.LabelSelectorOpNotIn {
				for range 1 + g.rng.IntN(2) {
					e.Values = append(e.Values, g.value(k))
				}
			}
			s.MatchExpressions = append(s.MatchExpressions, e)
		}
	}
	return s
}

// value is a value label key k may have: a namespace's name for its name's
// label.
func (g *Gen) value(k string) string {
	if k == corev1.LabelMetadataName {
		return g.pick(nsNames)
	}
	return g.pick(values)
}

// peers: none (every peer), or one or two of a podSelector alone, a
// namespaceSelector alone, both, or an ipBlock.
func (g *Gen) peers() []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for range g.rng.IntN(3) {
		var p networkingv1.NetworkPolicyPeer
		switch g.rng.IntN(4) {
		case 0:
			p.PodSelector = g.selector(podKeys)
		case 1:
			p.NamespaceSelector = g.selector(nsKeys)
		case 2:
			p.PodSelector, p.NamespaceSelector = g.selector(podKeys), g.selector(nsKeys)
		default:
			p.IPBlock = g.block()
		}
		out = append(out, p)
	}
	return out
}

// policyPorts: none (every port), or one or two ports: a protocol (absent:
// TCP), and every port of it, a number, a range (endPort) or a name some
// pod's container port has.
func (g *Gen) policyPorts() []networkingv1.NetworkPolicyPort {
	var named []netpol.NamedPort
	for _, p := range g.World.Pods {
		named = append(named, p.Ports...)
	}
	var out []networkingv1.NetworkPolicyPort
	for range g.rng.IntN(3) {
		var pp networkingv1.NetworkPolicyPort
		proto := netpol.Protos[g.rng.IntN(len(netpol.Protos))]
		switch k := g.rng.IntN(5); {
		case k == 0:
		case k == 1 && len(named) > 0:
			np := named[g.rng.IntN(len(named))]
			proto = np.Proto
			port := intstr.FromString(np.Name)
			pp.Port = &port
		default:
			n := g.port()
			port := intstr.FromInt32(int32(n))
			pp.Port = &port
			if g.rng.IntN(2) == 0 {
				end := min(65535, int32(n)+[]int32{0, 1, g.rng.Int32N(20), 65535}[g.rng.IntN(4)])
				pp.EndPort = &end
			}
		}
		if proto != netpol.TCP || g.rng.IntN(2) == 0 {
			p := corev1.Protocol(proto)
			pp.Protocol = &p
		}
		out = append(out, pp)
	}
	return out
}

// port is a port number: a usual one or any.
func (g *Gen) port() uint16 {
	if g.rng.IntN(4) > 0 {
		return portValues[g.rng.IntN(len(portValues))]
	}
	return uint16(1 + g.rng.IntN(65535))
}

// widths are how many low bits a prefix leaves free: a host, the pods'
// subnets and their neighbours, wider, everything.
var widths = []int{0, 1, 2, 4, 7, 8, 9, 12, 16, 24, 32, 128}

// block is an ipBlock of one of the world's families around a pod's
// address or a far one, with zero to two excepts inside it.
func (g *Gen) block() *networkingv1.IPBlock {
	fams := g.Families()
	v6 := fams[g.rng.IntN(len(fams))]
	base := g.near(v6)
	bits := max(0, base.BitLen()-widths[g.rng.IntN(len(widths))])
	cidr := netip.PrefixFrom(base, bits).Masked()
	b := &networkingv1.IPBlock{CIDR: g.spell(netip.PrefixFrom(base, bits))}
	for range g.rng.IntN(3) {
		ebits := base.BitLen() - widths[g.rng.IntN(len(widths))]
		if ebits <= cidr.Bits() {
			continue
		}
		b.Except = append(b.Except, g.spell(netip.PrefixFrom(within(cidr, g.near(v6)), ebits)))
	}
	return b
}

// spell writes a prefix as a CIDR, now and then with its host bits set
// ("10.0.0.5/24": parsed, and masked, as the network it names).
func (g *Gen) spell(p netip.Prefix) string {
	if g.rng.IntN(8) == 0 {
		return p.String()
	}
	return p.Masked().String()
}

// near is an address of the family: a pod's, one of the far ones, or
// either with some low bits changed.
func (g *Gen) near(v6 bool) netip.Addr {
	var from []netip.Addr
	for _, p := range g.World.Pods {
		for _, a := range p.IPs {
			if a.Is6() == v6 {
				from = append(from, a)
			}
		}
	}
	if len(from) == 0 || g.rng.IntN(4) == 0 {
		from = farAddr[v6]
	}
	a := from[g.rng.IntN(len(from))]
	if g.rng.IntN(2) == 0 {
		a = flipLow(a, g.rng.IntN(11), g.rng.Uint64())
	}
	return a
}

// flipLow is a with its n lowest bits replaced by r's.
func flipLow(a netip.Addr, n int, r uint64) netip.Addr {
	b := a.AsSlice()
	for i := range n {
		at := len(b) - 1 - i/8
		bit := byte(1) << (i % 8)
		b[at] &^= bit
		if r>>i&1 != 0 {
			b[at] |= bit
		}
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}

// within is a with its first bits p's: an address inside p.
func within(p netip.Prefix, a netip.Addr) netip.Addr {
	b, pb := a.AsSlice(), p.Addr().AsSlice()
	for i := range p.Bits() {
		bit := byte(0x80) >> (i % 8)
		b[i/8] = b[i/8]&^bit | pb[i/8]&bit
	}
	out, _ := netip.AddrFromSlice(b)
	return out
}

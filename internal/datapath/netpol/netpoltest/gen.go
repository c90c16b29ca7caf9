// Package netpoltest makes random NetworkPolicy worlds and probes for
// differential tests: a world (namespaces, pods, policies) and its probes
// follow from a seed alone, so a disagreement between an enforcer and the
// reference model (netpol.World.Allowed) is reproduced by its seed. Every
// world passes netpol.Check. Both IP families go through one code path: a
// world's family says which addresses its pods have.
package netpoltest

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Gen is a world drawn from a seed, with the addresses its probes pick
// from.
type Gen struct {
	Seed uint64
	// Family is the world's: its pods have an IPv4 address, an IPv6 one,
	// or both.
	Family family.Family
	World  *netpol.World
	// Outside are addresses of no pod, near the pods' and the ipBlocks'
	// and far from both.
	Outside []netip.Addr
	// Ports are the port numbers the policies and named ports mention,
	// with their neighbours.
	Ports []uint16
	rng   *rand.Rand
	// made is the last number a pod or policy was named with (Change).
	made int
}

// The vocabulary labels are drawn from: few keys and values, so that
// selectors often match.
var (
	nsNames    = []string{"x", "y", "z"}
	podKeys    = []string{"app", "tier"}
	nsKeys     = []string{"team", corev1.LabelMetadataName}
	values     = []string{"a", "b", "x", "y"}
	portNames  = []string{"http", "dns", "metrics"}
	portValues = []uint16{1, 53, 80, 443, 1000, 1001, 1023, 1024, 8080, 32768, 65535}
)

// The networks pods get their addresses from (base plus their index) and
// the far addresses outside (no pod near them), per family.
var (
	podNet  = map[bool]netip.Prefix{false: netip.MustParsePrefix("10.0.0.0/23"), true: netip.MustParsePrefix("fd00::/111")}
	farAddr = map[bool][]netip.Addr{
		false: {netip.MustParseAddr("192.168.7.7"), netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("10.200.0.1")},
		true:  {netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("fd10::1"), netip.MustParseAddr("fd00:ff::1")},
	}
)

// New draws the world of seed.
func New(seed uint64) *Gen {
	g := &Gen{Seed: seed, rng: rand.New(rand.NewPCG(seed, 0x6e6574706f6c))}
	g.Family = family.All[g.rng.IntN(len(family.All))]
	w := &netpol.World{}
	g.World = w
	for _, ns := range nsNames[:1+g.rng.IntN(len(nsNames))] {
		w.Namespaces = append(w.Namespaces, netpol.Namespace{Name: ns, Labels: g.labels([]string{"team"})})
	}
	// Most worlds are small (a disagreement is then easy to read); one in
	// four is larger.
	pods, policies := 2+g.rng.IntN(5), g.rng.IntN(5)
	if g.rng.IntN(4) == 0 {
		pods, policies = 7+g.rng.IntN(MaxPods-6), 3+g.rng.IntN(6)
	}
	for i := range pods {
		w.Pods = append(w.Pods, g.pod(i))
	}
	for i := range policies {
		w.Policies = append(w.Policies, g.policy(i))
	}
	g.made = max(pods, policies)
	g.collectOutside()
	g.collectPorts()
	return g
}

// Families are the address families of the world's pods (IPv6 true).
func (g *Gen) Families() []bool {
	var out []bool
	if g.Family.HasIPv4() {
		out = append(out, false)
	}
	if g.Family.HasIPv6() {
		out = append(out, true)
	}
	return out
}

func (g *Gen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

// labels draws zero to two labels of keys.
func (g *Gen) labels(keys []string) netpol.Labels {
	l := netpol.Labels{}
	for _, k := range keys {
		if g.rng.IntN(3) > 0 {
			l[k] = g.pick(values)
		}
	}
	return l
}

// MaxPods is the most pods a world has.
const MaxPods = 16

// PodNet is the network of family v6 (IPv6 true) every world's pods have
// their addresses in.
func PodNet(v6 bool) netip.Prefix { return podNet[v6] }

// PodAddr is the address of family v6 pod i has in every world: the
// network's base plus i+2, every other pod a subnet apart (10.0.1.x,
// fd00::1:x). Base+1 is left free: a lab keeps its pod network's first
// address for the pods' gateway, so a world's pods fit a lab's.
func PodAddr(i int, v6 bool) netip.Addr {
	b := podNet[v6].Addr().As16()
	n := i + 2 // from the 254th pod of a changed world on: 10.1.x.x, beyond PodNet (which holds MaxPods)
	b[13], b[14], b[15] = byte(n>>8), byte(i%2), byte(n)
	if !v6 {
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	return netip.AddrFrom16(b)
}

// pod i: in a namespace the world lists, or now and then in one it does
// not (it exists with its name's label only), at its PodAddr of each of
// the world's families.
func (g *Gen) pod(i int) netpol.Pod {
	ns := g.pick(nsNames)
	if g.rng.IntN(4) > 0 {
		ns = g.World.Namespaces[g.rng.IntN(len(g.World.Namespaces))].Name
	}
	p := netpol.Pod{Name: fmt.Sprintf("p%d", i), Namespace: ns, Labels: g.labels(podKeys)}
	for _, v6 := range g.Families() {
		p.IPs = append(p.IPs, PodAddr(i, v6))
	}
	for _, name := range portNames {
		if g.rng.IntN(3) == 0 {
			p.Ports = append(p.Ports, netpol.NamedPort{Name: name, Proto: netpol.Protos[g.rng.IntN(len(netpol.Protos))], Port: portValues[g.rng.IntN(len(portValues))]})
		}
	}
	return p
}

// policy i: in a namespace of the world's, a pod selector, its types
// (absent: the API server's defaults), zero to two rules each way.
func (g *Gen) policy(i int) networkingv1.NetworkPolicy {
	ns := g.World.Namespaces[g.rng.IntN(len(g.World.Namespaces))].Name
	p := networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("np%d", i), Namespace: ns}}
	p.Spec.PodSelector = *g.selector(podKeys)
	switch g.rng.IntN(4) {
	case 1:
		p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	case 2:
		p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	case 3:
		p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	}
	for range g.rng.IntN(3) {
		p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: g.peers(), Ports: g.policyPorts()})
	}
	for range g.rng.IntN(3) {
		p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: g.peers(), Ports: g.policyPorts()})
	}
	return p
}

package netpoltest

import (
	"fmt"
	"net/netip"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// Probe is a new connection's first packet: from Src to Dst on Proto and
// Port. Either end may be an address of no pod, never both, and the two
// ends are never one pod.
type Probe struct {
	Src, Dst netip.Addr
	Proto    netpol.Proto
	Port     uint16
}

func (p Probe) String() string {
	return fmt.Sprintf("%s -> %s %s/%d", p.Src, p.Dst, p.Proto, p.Port)
}

// Kind says which ends of the probe are pods of w: "pod to pod", "outside
// to pod" or "pod to outside".
func (p Probe) Kind(w *netpol.World) string {
	switch {
	case w.PodAt(p.Src) == nil:
		return "outside to pod"
	case w.PodAt(p.Dst) == nil:
		return "pod to outside"
	}
	return "pod to pod"
}

// Verdict names a verdict: "allowed" or "denied".
func Verdict(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

// Probes draws n probes, after the world, from the same seed.
func (g *Gen) Probes(n int) []Probe {
	out := make([]Probe, 0, n)
	for range n {
		out = append(out, g.probe())
	}
	return out
}

// probe: a family of the world's; a pod or an outside address as the
// source, and then a pod (another one) or, from a pod, an outside address
// as the destination; a port the world mentions, or any.
func (g *Gen) probe() Probe {
	fams := g.Families()
	v6 := fams[g.rng.IntN(len(fams))]
	pods := g.World.Pods
	addr := func(i int) netip.Addr {
		for _, a := range pods[i].IPs {
			if a.Is6() == v6 {
				return a
			}
		}
		panic("a pod without an address of its world's family")
	}
	outside := func() netip.Addr {
		var o []netip.Addr
		for _, a := range g.Outside {
			if a.Is6() == v6 {
				o = append(o, a)
			}
		}
		return o[g.rng.IntN(len(o))]
	}
	p := Probe{Proto: netpol.Protos[g.rng.IntN(len(netpol.Protos))], Port: uint16(1 + g.rng.IntN(65535))}
	if g.rng.IntN(5) > 0 {
		p.Port = g.Ports[g.rng.IntN(len(g.Ports))]
	}
	i := g.rng.IntN(len(pods))
	if g.rng.IntN(3) == 0 { // from outside to pod i
		p.Src, p.Dst = outside(), addr(i)
		return p
	}
	p.Src = addr(i)
	if g.rng.IntN(4) == 0 {
		p.Dst = outside()
		return p
	}
	p.Dst = addr((i + 1 + g.rng.IntN(len(pods)-1)) % len(pods)) // another pod
	return p
}

// collectOutside gathers addresses of no pod: beside each pod's, inside
// and at the edges of every ipBlock and except, and far ones.
func (g *Gen) collectOutside() {
	var cand []netip.Addr
	for _, v6 := range g.Families() {
		cand = append(cand, farAddr[v6]...)
		for range 8 {
			cand = append(cand, g.near(v6))
		}
	}
	for _, p := range g.World.Policies {
		for _, r := range p.Spec.Ingress {
			cand = append(cand, g.blockAddrs(r.From)...)
		}
		for _, r := range p.Spec.Egress {
			cand = append(cand, g.blockAddrs(r.To)...)
		}
	}
	for _, a := range cand {
		if g.World.PodAt(a) == nil && !slices.Contains(g.Outside, a) {
			g.Outside = append(g.Outside, a)
		}
	}
}

// blockAddrs are, for each ipBlock and except of peers, its first and last
// addresses and one inside.
func (g *Gen) blockAddrs(peers []networkingv1.NetworkPolicyPeer) []netip.Addr {
	var out []netip.Addr
	for _, peer := range peers {
		if peer.IPBlock == nil {
			continue
		}
		for _, s := range append([]string{peer.IPBlock.CIDR}, peer.IPBlock.Except...) {
			p := netip.MustParsePrefix(s)
			first := p.Masked().Addr()
			out = append(out, first, lastAddr(p), within(p, g.near(first.Is6())))
		}
	}
	return out
}

// collectPorts gathers the port numbers the world mentions (the usual
// ones, the policies' ports and range ends, the named ports' numbers) and
// their neighbours.
func (g *Gen) collectPorts() {
	ns := slices.Clone(portValues)
	for _, pod := range g.World.Pods {
		for _, np := range pod.Ports {
			ns = append(ns, np.Port)
		}
	}
	for _, p := range g.World.Policies {
		var ports []networkingv1.NetworkPolicyPort
		for _, r := range p.Spec.Ingress {
			ports = append(ports, r.Ports...)
		}
		for _, r := range p.Spec.Egress {
			ports = append(ports, r.Ports...)
		}
		for _, pp := range ports {
			if pp.Port != nil && pp.Port.Type == intstr.Int {
				ns = append(ns, uint16(pp.Port.IntVal))
			}
			if pp.EndPort != nil {
				ns = append(ns, uint16(*pp.EndPort))
			}
		}
	}
	for _, n := range ns {
		for _, m := range []int{int(n) - 1, int(n), int(n) + 1} {
			if m >= 1 && m <= 65535 {
				g.Ports = append(g.Ports, uint16(m))
			}
		}
	}
	slices.Sort(g.Ports)
	g.Ports = slices.Compact(g.Ports)
}

// lastAddr is the highest address of prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		b[i] = 0xff
	}
	ones, _ := netip.AddrFromSlice(b)
	return within(p, ones)
}

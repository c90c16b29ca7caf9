package topo

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/kernel"
)

// veth-routed: seed 002's "veth方式", Calico's way:
// each pod has a /24 address and a default route via 169.254.10.24 onlink;
// the node end of the veth answers ARP for it (proxy_arp) and the node routes
// to each pod with a /32 route; ip_forward on; FORWARD accepts pod traffic.
func init() {
	Register(Mode{
		Name:     VethRouted,
		Seeds:    []Seed{SeedLatency, SeedPodModes},
		Summary:  "veth per pod routed by the node: proxy_arp, /32 routes, gw 169.254.10.24 onlink (seed 002, Calico)",
		Requires: []kernel.Feature{kernel.Veth},
		Build:    buildVethRouted,
		Services: Services{Reach: ReachNodeNetfilter, EBPF: EBPFNodeVeth},
	})
}

// VethGateway is the seed's link-local gateway (Calico uses 169.254.1.1).
const VethGateway = "169.254.10.24"

func buildVethRouted(env *Env) error { return buildRouted(env, "veth-", VethToPod, true) }

// buildRouted is the routed plumbing of veth-routed and netkit: a pair per
// pod made by link (its node end named prefix+pod), the pod's default route
// via VethGateway onlink, a /32 route per pod in the node, ip_forward on,
// FORWARD accepting pod traffic. proxyARP: the node end answers ARP for the
// gateway (veth; an L3 netkit has no ARP).
func buildRouted(env *Env, prefix string, link func(*Env, *Pod, string) (netlink.Link, error), proxyARP bool) error {
	gw := net.ParseIP(VethGateway).To4()
	if err := Sysctls(env.Node.Name, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	// seed: iptables -I FORWARD -s 192.168.0.0/16 -d 192.168.0.0/16 -j ACCEPT
	if err := IptablesRestore(env.Node.Name, fmt.Sprintf("*filter\n-I FORWARD -s %s -d %s -j ACCEPT\nCOMMIT\n", env.PodNet, env.PodNet)); err != nil {
		return err
	}
	var kv []string
	for i, pod := range env.Pods {
		host := HostIfname(prefix, pod.Pod, i)
		l, err := link(env, pod, host)
		if err != nil {
			return err
		}
		if err := PodAddr(pod, env.Prefix(), gw, true); err != nil {
			return err
		}
		if err := env.Node.H.LinkSetUp(l); err != nil {
			return err
		}
		if proxyARP {
			// proxy_delay 0 as Calico sets it: otherwise the first ARP reply waits up to 0.8 s.
			kv = append(kv, "net.ipv4.conf."+host+".proxy_arp", "1", "net.ipv4.neigh."+host+".proxy_delay", "0")
		}
		// ip route add 192.168.10.10 dev veth-pod-a scope link
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: pod.IP, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}
		if err := env.Node.H.RouteAdd(r); err != nil {
			return fmt.Errorf("route to %s: %w", pod.Pod, err)
		}
	}
	if err := Sysctls(env.Node.Name, kv...); err != nil {
		return err
	}
	env.Gateway = VethGateway
	return nil
}

// HostIfname names the node end of a pod's link: prefix+pod when it fits in
// 15 characters, else prefix+index.
func HostIfname(prefix, pod string, i int) string {
	if n := prefix + pod; len(n) <= 15 {
		return n
	}
	return fmt.Sprintf("%s%d", prefix, i)
}

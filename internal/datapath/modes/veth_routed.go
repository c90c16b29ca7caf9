package modes

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
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
		Attach:   vethRouted,
		Services: Services{Reach: ReachNodeNetfilter, EBPF: EBPFNodeVeth},
		Policies: Policies{NodeFilter: true, PodIf: true},
		IPv6:     true,
	})
}

// VethGateway is the seed's link-local gateway (Calico uses 169.254.1.1).
const VethGateway = "169.254.10.24"

// vethRouted is veth-routed's per-pod wiring, shared with veth-ebpf.
var vethRouted = routed("veth-", "veth", VethToPod, true)

// routed is the routed plumbing of veth-routed and netkit: a pair per pod
// (a kind link) made by link (its node end named prefix+pod), the pod's default route via
// VethGateway onlink, a /32 route per pod in the node, ip_forward on,
// FORWARD accepting pod traffic. proxyARP: the node end answers ARP for the
// gateway (veth; an L3 netkit has no ARP).
func routed(prefix, kind string, link func(*Env, *Pod, string) (netlink.Link, error), proxyARP bool) *Attach {
	a := &Attach{Node: routedNode, Detach: func(env *Env, pod *Pod) error { return deleteHostLink(env, pod.HostIfname(prefix, 0)) }}
	a.Pod = func(env *Env, pod *Pod, i int) error {
		host := pod.HostIfname(prefix, i)
		l, err := link(env, pod, host)
		if err != nil {
			return err
		}
		if err := PodAddr(pod, env.Prefix(), net.ParseIP(VethGateway).To4(), true); err != nil {
			return err
		}
		if err := env.Node.H.LinkSetUp(l); err != nil {
			return err
		}
		if proxyARP {
			// proxy_delay 0 as Calico sets it: otherwise the first ARP reply waits up to 0.8 s.
			if err := Sysctls(env.Node.Name, "net.ipv4.conf."+host+".proxy_arp", "1", "net.ipv4.neigh."+host+".proxy_delay", "0"); err != nil {
				return err
			}
		}
		if pod.IP6 != nil {
			if err := routed6(env, pod, l); err != nil {
				return err
			}
		}
		env.Gateway = VethGateway
		if pod.IP == nil {
			return nil
		}
		// ip route add 192.168.10.10 dev veth-pod-a scope link
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: pod.IP, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}
		if err := env.Node.H.RouteAdd(r); err != nil {
			return fmt.Errorf("route to %s: %w", pod.Pod, err)
		}
		return nil
	}
	a.Check = func(env *Env, pod *Pod) error {
		host, err := checkPodLink(env, pod, pod.HostIfname(prefix, 0), kind)
		if err != nil {
			return err
		}
		if pod.IP6 != nil {
			if err := checkRouted6(env, pod, host); err != nil {
				return err
			}
		}
		if pod.IP == nil {
			return nil
		}
		rs, err := env.Node.H.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: &net.IPNet{IP: pod.IP, Mask: net.CIDRMask(32, 32)}, LinkIndex: host.Attrs().Index}, netlink.RT_FILTER_DST|netlink.RT_FILTER_OIF)
		if err != nil || len(rs) == 0 {
			return fmt.Errorf("no route to %s via %s in the node", pod.IP, host.Attrs().Name)
		}
		return nil
	}
	return a
}

// buildRouted builds a whole lab with routed's plumbing (netkit modes).
func buildRouted(env *Env, prefix, kind string, link func(*Env, *Pod, string) (netlink.Link, error), proxyARP bool) error {
	return AttachAll(routed(prefix, kind, link, proxyARP))(env)
}

// routedNode: ip_forward on, and FORWARD accepting pod-to-pod traffic.
func routedNode(env *Env) error {
	if err := Sysctls(env.Node.Name, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	if env.HasIPv6() {
		if err := routedNode6(env); err != nil {
			return err
		}
	}
	// seed: iptables -I FORWARD -s 192.168.0.0/16 -d 192.168.0.0/16 -j ACCEPT
	return ensureRule(env.Node.Name, "filter", "FORWARD", "-s", env.PodNet.String(), "-d", env.PodNet.String(), "-j", "ACCEPT")
}

// HostIfname names the node end of a pod's link: prefix+pod when it fits in
// 15 characters, else prefix+index.
func HostIfname(prefix, pod string, i int) string {
	if n := prefix + pod; len(n) <= 15 {
		return n
	}
	return fmt.Sprintf("%s%d", prefix, i)
}

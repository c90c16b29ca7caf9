package modes

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// veth-routed over IPv6, Calico's way: each pod has its address as a /128
// and a default route via fe80::1 (GatewayLL6) on its eth0; the node end of
// its veth holds fe80::1, so it answers the pod's neighbour solicitation
// for it (no proxy NDP needed), and the node routes to each pod with a /128
// route on that veth; forwarding on; FORWARD accepts pod traffic.

// routed6 is routed's IPv6 half for one pod whose pair host is up.
func routed6(env *Env, pod *Pod, host netlink.Link) error {
	gw := net.ParseIP(GatewayLL6)
	if err := AddrAdd6(env.Node.H, host, gw, 64); err != nil {
		return err
	}
	if err := PodAddr6(pod, 128, gw); err != nil {
		return err
	}
	env.Gateway6 = GatewayLL6
	// ip -6 route add fd00:10:244::a dev veth-pod-a
	r := &netlink.Route{LinkIndex: host.Attrs().Index, Dst: &net.IPNet{IP: pod.IP6, Mask: net.CIDRMask(128, 128)}, Family: unix.AF_INET6}
	if err := env.Node.H.RouteAdd(r); err != nil {
		return fmt.Errorf("IPv6 route to %s: %w", pod.Pod, err)
	}
	return nil
}

// routedNode6: IPv6 forwarding on, and FORWARD accepting pod-to-pod traffic.
func routedNode6(env *Env) error {
	if err := Forwarding6(env.Node.Name); err != nil {
		return err
	}
	return ensureRule6(env.Node.Name, "filter", "FORWARD", "-s", env.PodNet6.String(), "-d", env.PodNet6.String(), "-j", "ACCEPT")
}

// checkRouted6 checks the node's /128 route to the pod through host.
func checkRouted6(env *Env, pod *Pod, host netlink.Link) error {
	rs, err := env.Node.H.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Dst: &net.IPNet{IP: pod.IP6, Mask: net.CIDRMask(128, 128)}, LinkIndex: host.Attrs().Index}, netlink.RT_FILTER_DST|netlink.RT_FILTER_OIF)
	if err != nil || len(rs) == 0 {
		return fmt.Errorf("no IPv6 route to %s via %s in the node", pod.IP6, host.Attrs().Name)
	}
	return nil
}

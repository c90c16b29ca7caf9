package modes

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// host-gw and vxlan over IPv6 (flannel's dual-stack): each node's cni0 holds
// ::1 of the node's IPv6 share of the pod network as well; host-gw routes
// the other node's share via that node's IPv6 underlay address, vxlan
// through flannel.1 (vxlan_ipv6.go). The underlay itself carries both
// families; vxlan's tunnel stays on its IPv4 addresses.

// bridgePerNode6 is bridgePerNode's IPv6 half for one node (namespace
// ns): forwarding on and FORWARD accepting the pods' IPv6 traffic (podNet6:
// the lab's whole IPv6 pod network).
func bridgePerNode6(ns string, podNet6 *net.IPNet) error {
	if err := Forwarding6(ns); err != nil {
		return err
	}
	return Ip6tablesRestore(ns, podForwardRules(podNet6))
}

// hostGWRoute6 routes the peer node's IPv6 share of the pods via its IPv6
// underlay address.
func hostGWRoute6(n, peer *Node, under netlink.Link) error {
	r := &netlink.Route{Dst: peer.PodNet6, Gw: peer.UnderlayIP6, LinkIndex: under.Attrs().Index, Family: unix.AF_INET6}
	if err := n.H.RouteAdd(r); err != nil {
		return fmt.Errorf("%s: route to %s via %s: %w", n.Node, peer.PodNet6, peer.UnderlayIP6, err)
	}
	return nil
}

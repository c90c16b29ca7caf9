package modes

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// vxlanPeer6 is flannel.1's IPv6 side on node n, as its IPv4 one: the
// node's IPv6 share's network address as a /128, the peer's share routed
// via the peer's such address onlink, and a permanent neighbour entry
// giving that address the peer VTEP's MAC. The FDB entry already sends that
// MAC to the peer's IPv4 underlay address: IPv6 pods over an IPv4 tunnel.
func vxlanPeer6(n, peer *Node, peerIdx int, vx netlink.Link) error {
	if err := AddrAdd6(n.H, vx, n.PodNet6.IP, 128); err != nil {
		return err
	}
	gw := peer.PodNet6.IP
	if err := n.H.RouteAdd(&netlink.Route{Dst: peer.PodNet6, Gw: gw, LinkIndex: vx.Attrs().Index, Flags: int(netlink.FLAG_ONLINK), Family: unix.AF_INET6}); err != nil {
		return fmt.Errorf("%s: route to %s: %w", n.Node, peer.PodNet6, err)
	}
	if err := n.H.NeighAdd(&netlink.Neigh{LinkIndex: vx.Attrs().Index, Family: unix.AF_INET6, State: netlink.NUD_PERMANENT, IP: gw, HardwareAddr: vtepMAC(peerIdx)}); err != nil {
		return fmt.Errorf("%s: neighbour entry for the peer VTEP's %s: %w", n.Node, gw, err)
	}
	return nil
}

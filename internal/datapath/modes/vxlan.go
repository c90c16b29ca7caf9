package modes

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// vxlan: flannel's vxlan backend, for seed 003's empty VXLAN rows: per-node
// pod subnets on cni0 (as host-gw), plus a VXLAN device flannel.1 (VNI 1,
// UDP 4789, learning off) on each node. The other node's subnet is routed via
// its VTEP address onlink on flannel.1, with a static ARP entry and a static
// FDB entry pointing that VTEP's MAC at the other node's underlay address,
// exactly what flanneld programs. Pod MTU is 1450 (50 bytes of VXLAN header).
func init() {
	Register(Mode{
		Name:      Vxlan,
		MaxPods:   bridgePorts("cni0", ""),
		Seeds:     []Seed{SeedBridgeOVS},
		Summary:   "cross-host (--nodes 2): kernel VXLAN overlay with static FDB/ARP, per-node subnets on cni0 (flannel vxlan; seed 003's empty rows)",
		Requires:  []kernel.Feature{kernel.Veth, kernel.Bridge, kernel.Vxlan},
		Build:     buildVxlan,
		MinNodes:  2,
		CrossHost: true,
		Links:     Links{Tunnel: 1500 - VxlanMTU},
		IPv6:      true,
	})
}

// VxlanMTU leaves room for the outer Ethernet+IP+UDP+VXLAN headers.
const VxlanMTU = 1450

func vtepMAC(i int) net.HardwareAddr { return net.HardwareAddr{0x02, 0x76, 0x78, 0, 0, byte(i + 1)} }

func buildVxlan(env *Env) error {
	if len(env.Nodes) < 2 {
		return fmt.Errorf("vxlan joins nodes: use --nodes 2")
	}
	for _, p := range env.Pods {
		p.MTU = VxlanMTU
	}
	if err := bridgePerNode(env, "cni0"); err != nil {
		return err
	}
	for i, n := range env.Nodes {
		under, err := n.H.LinkByName(env.Underlay)
		if err != nil {
			return err
		}
		vx := &netlink.Vxlan{
			LinkAttrs:    netlink.LinkAttrs{Name: "flannel.1", MTU: VxlanMTU, HardwareAddr: vtepMAC(i)},
			VxlanId:      1,
			VtepDevIndex: under.Attrs().Index,
			SrcAddr:      n.UnderlayIP,
			Port:         4789,
			Learning:     false,
		}
		if err := n.H.LinkAdd(vx); err != nil {
			return fmt.Errorf("%s: vxlan flannel.1: %w", n.Node, err)
		}
		// flannel gives flannel.1 its subnet's network address as a /32.
		if err := n.H.AddrAdd(vx, &netlink.Addr{IPNet: &net.IPNet{IP: n.PodNet.IP, Mask: net.CIDRMask(32, 32)}}); err != nil {
			return err
		}
		if err := n.H.LinkSetUp(vx); err != nil {
			return err
		}
		peerIdx := 1 - i
		peer := env.Nodes[peerIdx]
		if err := n.H.RouteAdd(&netlink.Route{Dst: peer.PodNet, Gw: peer.PodNet.IP, LinkIndex: vx.Attrs().Index, Flags: int(netlink.FLAG_ONLINK)}); err != nil {
			return fmt.Errorf("%s: route to %s: %w", n.Node, peer.PodNet, err)
		}
		if err := n.H.NeighAdd(&netlink.Neigh{LinkIndex: vx.Attrs().Index, State: netlink.NUD_PERMANENT, IP: peer.PodNet.IP, HardwareAddr: vtepMAC(peerIdx)}); err != nil {
			return fmt.Errorf("%s: ARP for the peer VTEP: %w", n.Node, err)
		}
		if err := n.H.NeighAppend(&netlink.Neigh{LinkIndex: vx.Attrs().Index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			State: netlink.NUD_PERMANENT, HardwareAddr: vtepMAC(peerIdx), IP: peer.UnderlayIP}); err != nil {
			return fmt.Errorf("%s: FDB for the peer VTEP: %w", n.Node, err)
		}
		if env.HasIPv6() {
			if err := vxlanPeer6(n, peer, peerIdx, vx); err != nil {
				return err
			}
		}
	}
	env.Facts = map[string]string{"vni": "1", "port": "4789", "mtu": fmt.Sprint(VxlanMTU)}
	return nil
}

package modes

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// ovs and ovs-internal across nodes (--nodes 2): seed 003
// (seed 003, bridge vs Open vSwitch vs KVM, same host and across hosts) "不同宿主": every host runs its own Open
// vSwitch, here a private ovsdb-server + ovs-vswitchd pair per node
// namespace with its files in ovs-node1/, ovs-node2/ of the lab directory.
// Pods of both nodes share one L2 segment, as in the cross-host bridge mode:
// each node's ovsbr local port holds that node's gateway (.1 of its share)
// with the whole pod network's prefix.
//
//   - encap=none, "无封装 / ovs": the physical NIC is a port of the bridge
//     (ovs-vsctl add-port ovsbr em1); here the underlay eth1. It keeps its
//     address, as in the seed: on netdev vswitchd reads eth1 through an
//     AF_PACKET socket, which leaves the node's own stack working beside it.
//   - encap=vxlan, "vxlan封装 / ovs" (em1 - - - vtep - ovsbr, empty in the
//     seed): an OVS vxlan port on ovsbr (VNI 1, UDP 4789) whose remote_ip is
//     the other node's underlay address; pods' MTU 1450. The kernel datapath
//     encapsulates through the node's routing table and eth1 stays as it is.
//     The netdev datapath encapsulates in vswitchd ("userspace tunneling"),
//     which routes and resolves ARP itself and can only send the outer
//     packet out of one of its own bridges: so eth1 becomes the port of a
//     second bridge, ovsphy, whose local port takes eth1's address (OVS's
//     Documentation/howto/userspace-tunneling.rst, br-phy).
const (
	EncapNone  = "none"
	EncapVxlan = "vxlan"
)

func checkEncap(v string) error {
	if v != EncapNone && v != EncapVxlan {
		return fmt.Errorf("option encap=%q: want none or vxlan", v)
	}
	return nil
}

// ovsAttach wires env's pods to ovsbr of sw with a default route via gw;
// txOff: switch the veths' TX checksum offload off.
type ovsAttach func(env *Env, sw *OVSSwitch, gw net.IP, txOff bool) error

func buildOVSAcrossNodes(env *Env, attach ovsAttach) error {
	c, err := ovsSettings(env)
	if err != nil {
		return err
	}
	mtu := 0
	if c.Encap == EncapVxlan {
		mtu = VxlanMTU
		for _, p := range env.Pods {
			p.MTU = VxlanMTU
		}
	}
	var dirs []string
	for i, n := range env.Nodes {
		sub := env.ForNode(i)
		gw := NthIP(sub.PodNet, 1)
		dir := filepath.Join(env.StateDir, "ovs-"+n.Node)
		sw, err := ovsNodeBridge(sub, dir, c, &net.IPNet{IP: gw, Mask: env.PodNet.Mask}, env.Prefix6(), mtu)
		if err != nil {
			return fmt.Errorf("%s: %w", n.Node, err)
		}
		dirs = append(dirs, dir)
		peer := env.Nodes[1-i]
		if c.Encap == EncapVxlan {
			err = ovsVxlanUplink(sub, sw, n, peer, env.Underlay)
		} else {
			_, err = sw.Vsctl(append([]string{"add-port", "ovsbr", env.Underlay}, keepQdisc(env.Underlay)...)...)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", n.Node, err)
		}
		sub.PodNet, sub.PodNet6 = env.PodNet, env.PodNet6 // pods see the whole network as on-link
		if err := attach(sub, sw, gw, c.TxOff()); err != nil {
			return fmt.Errorf("%s: %w", n.Node, err)
		}
	}
	env.Gateway = "per node: .1 of its share"
	if env.HasIPv6() {
		env.Gateway6 = "per node: ::1 of its share"
	}
	env.Facts = map[string]string{"datapath": c.Datapath, "ovs_dir": strings.Join(dirs, ","),
		"userspace_tso": onOffWord(c.TSO), "encap": c.Encap, "offload": ovsOffloadFact(c, c.TxOff())}
	switch {
	case c.Encap == EncapNone:
		env.Facts["underlay"] = env.Underlay + " is a port of ovsbr on both nodes (no encapsulation)"
	case c.Datapath == DatapathNetdev:
		env.Facts["underlay"] = fmt.Sprintf("vxlan0 on ovsbr, VNI 1, UDP 4789, MTU %d; userspace tunneling out of ovsphy (holds the underlay IP, %s its port)", VxlanMTU, env.Underlay)
	default:
		env.Facts["underlay"] = fmt.Sprintf("vxlan0 on ovsbr, VNI 1, UDP 4789, MTU %d; kernel routes it out of %s", VxlanMTU, env.Underlay)
	}
	return nil
}

// keepQdisc continues an add-port transaction: QoS type linux-noop tells
// vswitchd to leave the port's qdisc alone. Without it vswitchd replaces any
// qdisc it does not manage with the default one, which would remove the
// underlay's tbf (--underlay-rate).
func keepQdisc(port string) []string {
	return []string{"--", "set", "port", port, "qos=@noop", "--", "--id=@noop", "create", "qos", "type=linux-noop"}
}

// ovsVxlanUplink adds ovsbr's vxlan port towards peer; on the netdev
// datapath it first puts the underlay under vswitchd's control (ovsphy).
func ovsVxlanUplink(env *Env, sw *OVSSwitch, n, peer *Node, underlay string) error {
	if sw.Datapath == DatapathNetdev {
		if err := ovsPhyBridge(env, sw, n, underlay); err != nil {
			return err
		}
	}
	_, err := sw.Vsctl("add-port", "ovsbr", "vxlan0", "--", "set", "interface", "vxlan0", "type=vxlan",
		"options:remote_ip="+peer.UnderlayIP.String(), "options:key=1")
	return err
}

// ovsPhyBridge: userspace tunneling's br-phy. eth1 becomes a port of bridge
// ovsphy (same MAC, so the peer's neighbour entry stays right) and its
// address moves to ovsphy's local port: the node's route to the underlay
// then leads out of an OVS bridge, which vswitchd's tunnel code requires.
func ovsPhyBridge(env *Env, sw *OVSSwitch, n *Node, underlay string) error {
	eth, err := env.Node.H.LinkByName(underlay)
	if err != nil {
		return err
	}
	args := []string{"add-br", "ovsphy", "--", "set", "bridge", "ovsphy", "datapath_type=" + sw.Datapath,
		"other_config:hwaddr=\"" + eth.Attrs().HardwareAddr.String() + "\"", "--", "add-port", "ovsphy", underlay}
	if _, err := sw.Vsctl(append(args, keepQdisc(underlay)...)...); err != nil {
		return err
	}
	phy, err := waitLink(env.Node.H, "ovsphy", 5*time.Second)
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: n.UnderlayIP, Mask: net.CIDRMask(24, 32)}}
	addrs, err := env.Node.H.AddrList(eth, netlink.FAMILY_V4)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a.IP.Equal(n.UnderlayIP) {
			addr = &netlink.Addr{IPNet: a.IPNet}
			if err := env.Node.H.AddrDel(eth, &a); err != nil {
				return fmt.Errorf("move %s off %s: %w", a.IPNet, underlay, err)
			}
		}
	}
	if err := env.Node.H.AddrAdd(phy, addr); err != nil {
		return fmt.Errorf("underlay address %s on ovsphy: %w", addr.IPNet, err)
	}
	return env.Node.H.LinkSetUp(phy)
}

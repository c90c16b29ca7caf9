package lab

// The wiring every lab gets whatever its mode: each node's uplink eth0 on a
// LAN (bridge lan0) in the "ext" namespace, which plays the rest of the
// world, and with --nodes 2 the underlay veth eth1 between the nodes.

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Underlay: the link between each node's eth0 and the "external" namespace.
var underlay = mustCIDR("10.10.0.0/24")

const (
	extIPIndex   = 1  // 10.10.0.1: the node's default gateway, in the ext namespace
	nodeIPOffset = 10 // node i gets 10.10.0.(11+i)
)

func mustCIDR(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }

// wireUplinks joins each node's eth0 to the external namespace, whose bridge
// lan0 holds 10.10.0.1, the nodes' default gateway, like a real host's eth0
// on a LAN. The default route matters: without one (measured) proxy_arp
// never answers for the pods' gateway and clusterIP traffic fails with
// "No route to host".
func wireUplinks(env *modes.Env) error {
	extFD, err := nsutil.FD(env.Ext.Name)
	if err != nil {
		return err
	}
	defer extFD.Close()
	prefix := maskOnes(underlay)
	lan := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "lan0"}}
	if err := env.Ext.H.LinkAdd(lan); err != nil {
		return fmt.Errorf("ext bridge: %w", err)
	}
	if err := setAddrUp(env.Ext.H, "lan0", env.ExtIP, prefix); err != nil {
		return err
	}
	for _, n := range env.Nodes {
		peer := n.Node // the ext end is named after the node it leads to
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: env.Uplink, MTU: 1500}, PeerName: peer, PeerNamespace: netlink.NsFd(int(extFD))}
		if err := n.H.LinkAdd(v); err != nil {
			return fmt.Errorf("%s uplink veth: %w", n.Node, err)
		}
		if err := setAddrUp(n.H, env.Uplink, n.IP, prefix); err != nil {
			return err
		}
		pl, err := env.Ext.H.LinkByName(peer)
		if err != nil {
			return err
		}
		if err := env.Ext.H.LinkSetMaster(pl, lan); err != nil {
			return err
		}
		if err := env.Ext.H.LinkSetUp(pl); err != nil {
			return err
		}
		if err := n.H.RouteAdd(&netlink.Route{Gw: env.ExtIP}); err != nil {
			return fmt.Errorf("%s default route: %w", n.Node, err)
		}
		// The ext namespace routes replies for each node's pods back to it.
		if err := env.Ext.H.RouteAdd(&netlink.Route{Dst: n.PodNet, Gw: n.IP}); err != nil {
			return fmt.Errorf("ext route to %s's pods: %w", n.Node, err)
		}
	}
	if env.HasIPv6() {
		return wireUplinks6(env)
	}
	return nil
}

// Node-to-node underlay (--nodes 2): a veth between node1 and node2 (eth1),
// 10.20.0.1 and 10.20.0.2, optionally shaped with tbf to mimic the seeds' 10GbE.
var underlayNet = mustCIDR("10.20.0.0/24")

const underlayIf = "eth1"

func wireUnderlay(env *modes.Env, rate string) error {
	if len(env.Nodes) != 2 {
		return fmt.Errorf("the underlay joins exactly 2 nodes (got %d)", len(env.Nodes))
	}
	a, b := env.Nodes[0], env.Nodes[1]
	bFD, err := nsutil.FD(b.Name)
	if err != nil {
		return err
	}
	defer bFD.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: underlayIf, MTU: 1500}, PeerName: underlayIf, PeerNamespace: netlink.NsFd(int(bFD))}
	if err := a.H.LinkAdd(v); err != nil {
		return fmt.Errorf("underlay veth: %w", err)
	}
	for i, n := range env.Nodes {
		n.UnderlayIP = modes.NthIP(underlayNet, i+1)
		if err := setAddrUp(n.H, underlayIf, n.UnderlayIP, maskOnes(underlayNet)); err != nil {
			return err
		}
		if rate != "" {
			if err := shape(n.H, underlayIf, rate); err != nil {
				return err
			}
		}
	}
	env.Underlay = underlayIf
	if env.HasIPv6() {
		return wireUnderlay6(env)
	}
	return nil
}

func setAddrUp(h *netlink.Handle, name string, ip net.IP, prefix int) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(prefix, 32)}}); err != nil {
		return fmt.Errorf("address %s on %s: %w", ip, name, err)
	}
	return h.LinkSetUp(l)
}

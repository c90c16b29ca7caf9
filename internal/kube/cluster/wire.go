package cluster

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// wire builds the control plane's bridge and each node's uplink, routes to
// every other node's pod ranges, and forwarding in the nodes: of each family
// of the cluster (the IPv4 side always: the nodes reach the API server on
// apiIP).
func (b *builder) wire(cpNS string) error {
	if err := b.l.CreateNS(cpNS); err != nil {
		return err
	}
	cp, err := nsutil.Handle(cpNS)
	if err != nil {
		return err
	}
	defer cp.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridge}}
	if err := cp.LinkAdd(br); err != nil {
		return fmt.Errorf("control-plane bridge: %w", err)
	}
	if err := addrUp(cp, bridge, apiIP); err != nil {
		return err
	}
	// Spec.Validate has checked that new namespaces carry IPv6
	// (kernel.Check(kernel.IPv6)).
	v6 := b.addrs.fam.HasIPv6()
	if v6 {
		if err := addr6(cp, bridge, apiIP6); err != nil {
			return err
		}
	}
	cpFD, err := nsutil.FD(cpNS)
	if err != nil {
		return err
	}
	defer cpFD.Close()
	for _, n := range b.nodes {
		if err := b.l.CreateNS(n.ns); err != nil {
			return err
		}
		h, err := nsutil.Handle(n.ns)
		if err != nil {
			return err
		}
		defer h.Close()
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: uplink, MTU: 1500}, PeerName: n.name, PeerNamespace: netlink.NsFd(int(cpFD))}
		if err := h.LinkAdd(v); err != nil {
			return fmt.Errorf("%s uplink: %w", n.name, err)
		}
		if err := addrUp(h, uplink, n.ip); err != nil {
			return err
		}
		peer, err := cp.LinkByName(n.name)
		if err != nil {
			return err
		}
		if err := cp.LinkSetMaster(peer, br); err != nil {
			return err
		}
		if err := cp.LinkSetUp(peer); err != nil {
			return err
		}
		if err := h.RouteAdd(&netlink.Route{Gw: apiIP}); err != nil {
			return fmt.Errorf("%s default route: %w", n.name, err)
		}
		if err := cp.RouteAdd(&netlink.Route{Dst: n.pods, Gw: n.ip}); err != nil {
			return err
		}
		for _, o := range b.nodes {
			// flannel and Cilium route to the other nodes' pods themselves.
			if o.name != n.name && b.spec.CNI != clusternet.CNIFlannel && b.spec.CNI != clusternet.CNICilium {
				if err := h.RouteAdd(&netlink.Route{Dst: o.pods, Gw: o.ip}); err != nil {
					return fmt.Errorf("%s route to %s's pods: %w", n.name, o.name, err)
				}
			}
		}
		// Per-namespace sysctls: the node routes for its pods, and bridged
		// pod-to-pod replies go through iptables/nftables so a Service's
		// translation is undone (as on every kube-proxy node).
		sysctls := []string{"net.ipv4.ip_forward", "1", "net.bridge.bridge-nf-call-iptables", "1"}
		if v6 {
			if err := b.wire6(cp, h, n); err != nil {
				return err
			}
			sysctls = append(sysctls, "net.ipv6.conf.all.forwarding", "1", "net.bridge.bridge-nf-call-ip6tables", "1")
		}
		if err := modes.Sysctls(n.ns, sysctls...); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	return nil
}

func addrUp(h *netlink.Handle, name string, ip net.IP) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	ones, _ := nodeNet.Mask.Size()
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(ones, 32)}}); err != nil {
		return fmt.Errorf("address %s on %s: %w", ip, name, err)
	}
	return h.LinkSetUp(l)
}

// wire6 is wire's IPv6 side for node n (h: its namespace; cp: the control
// plane's): its eth0's IPv6 address, a default route via the bridge's, and
// routes to every other node's IPv6 pods via that node.
func (b *builder) wire6(cp, h *netlink.Handle, n node) error {
	ip6, pods6 := n.ips[len(n.ips)-1], n.podRanges[len(n.podRanges)-1]
	if err := addr6(h, uplink, ip6); err != nil {
		return err
	}
	if err := h.RouteAdd(&netlink.Route{Gw: apiIP6, Family: unix.AF_INET6}); err != nil {
		return fmt.Errorf("%s IPv6 default route: %w", n.name, err)
	}
	if err := cp.RouteAdd(&netlink.Route{Dst: pods6, Gw: ip6, Family: unix.AF_INET6}); err != nil {
		return err
	}
	for _, o := range b.nodes {
		if o.name != n.name {
			if err := h.RouteAdd(&netlink.Route{Dst: o.podRanges[len(o.podRanges)-1], Gw: o.ips[len(o.ips)-1], Family: unix.AF_INET6}); err != nil {
				return fmt.Errorf("%s IPv6 route to %s's pods: %w", n.name, o.name, err)
			}
		}
	}
	return nil
}

// addr6 gives link name an address of nodeNet6 (no duplicate address
// detection: usable at once).
func addr6(h *netlink.Handle, name string, ip net.IP) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	ones, _ := nodeNet6.Mask.Size()
	return modes.AddrAdd6(h, l, ip, ones)
}

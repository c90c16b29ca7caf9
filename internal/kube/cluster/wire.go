package cluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/kube/network"
	"github.com/vnetlab/vnetlab/internal/nsutil"
)

// wire builds the control plane's bridge and each node's uplink, routes to
// every other node's pod range, and forwarding in the nodes.
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
			// flannel routes to the other nodes' pods itself.
			if o.name != n.name && b.spec.CNI != network.CNIFlannel {
				if err := h.RouteAdd(&netlink.Route{Dst: o.pods, Gw: o.ip}); err != nil {
					return fmt.Errorf("%s route to %s's pods: %w", n.name, o.name, err)
				}
			}
		}
		// Per-namespace sysctls: the node routes for its pods, and bridged
		// pod-to-pod replies go through iptables/nftables so a Service's
		// translation is undone (as on every kube-proxy node).
		if err := nsutil.Do(n.ns, func() error {
			for _, s := range []string{"net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables"} {
				if err := os.WriteFile(filepath.Join("/proc/sys", strings.ReplaceAll(s, ".", "/")), []byte("1"), 0o644); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			return nil
		}); err != nil {
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

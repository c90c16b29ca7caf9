package modes

// Family-aware addressing: what the modes' IPv6 wiring shares.
// Each mode's own IPv6 steps are in its NAME_ipv6.go.

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// GatewayLL6 is the IPv6 gateway of routed pods (veth-routed, veth-ebpf):
// a link-local address on the node end of every pod's veth, as Calico
// routes pods via the node end's link-local address; each pod reaches it
// on its own link, so all node ends can hold the same one.
const GatewayLL6 = "fe80::1"

// Addr is the address to dial over family f ("" when the path has none).
func (e Endpoint) Addr(f family.Family) string {
	if f.Or() == family.IPv6 {
		return e.Target6
	}
	return e.Target
}

// ipText is ip as text, "" for none.
func ipText(ip net.IP) string {
	if ip == nil {
		return ""
	}
	return ip.String()
}

// Prefix6 returns the IPv6 pod network's prefix length.
func (e *Env) Prefix6() int {
	if e.PodNet6 == nil { // an IPv4 lab
		return 0
	}
	ones, _ := e.PodNet6.Mask.Size()
	return ones
}

// HasIPv6 says whether the lab's pods have IPv6 addresses.
func (e *Env) HasIPv6() bool { return e.Family.HasIPv6() }

// AddrAdd6 gives link an IPv6 address without duplicate address detection
// (nodad): usable at once, and no neighbour solicitation per address.
func AddrAdd6(h *netlink.Handle, link netlink.Link, ip net.IP, prefix int) error {
	a := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(prefix, 128)}, Flags: unix.IFA_F_NODAD}
	if err := h.AddrAdd(link, a); err != nil {
		return fmt.Errorf("address %s on %s: %w", a.IPNet, link.Attrs().Name, err)
	}
	return nil
}

// PodAddr6 gives the pod its IPv6 address (prefix: its length; 128 for a
// routed pod), brings its interface up and adds a default route via gw
// (a link-local gateway is reached on the pod's interface; nil: none).
func PodAddr6(pod *Pod, prefix int, gw net.IP) error {
	l, err := pod.H.LinkByName(pod.Ifname)
	if err != nil {
		return fmt.Errorf("%s: %w", pod.Pod, err)
	}
	if err := AddrAdd6(pod.H, l, pod.IP6, prefix); err != nil {
		return fmt.Errorf("%s: %w", pod.Pod, err)
	}
	if err := pod.H.LinkSetUp(l); err != nil {
		return err
	}
	if gw == nil {
		return nil
	}
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw, Family: unix.AF_INET6}
	if err := pod.H.RouteAdd(r); err != nil {
		return fmt.Errorf("%s: IPv6 default route via %s: %w", pod.Pod, gw, err)
	}
	return nil
}

// Forwarding6 turns IPv6 forwarding on in a node.
func Forwarding6(ns string) error {
	return Sysctls(ns, "net.ipv6.conf.all.forwarding", "1")
}

// Ip6tablesRestore loads IPv6 rules into a namespace in one transaction
// (ip6tables-restore --noflush), as IptablesRestore does for IPv4.
func Ip6tablesRestore(ns string, rules string) error { return restore(ns, "ip6tables-restore", rules) }

// ensureRule6 is ensureRule for ip6tables.
func ensureRule6(ns, table, chain string, rule ...string) error {
	return ensureRuleWith("ip6tables", ns, table, chain, rule...)
}

// hasAddr says whether link in h holds ip (of ip's family).
func hasAddr(h *netlink.Handle, link netlink.Link, ip net.IP) (bool, error) {
	fam := netlink.FAMILY_V4
	if ip.To4() == nil {
		fam = netlink.FAMILY_V6
	}
	addrs, err := h.AddrList(link, fam)
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			return true, nil
		}
	}
	return false, nil
}

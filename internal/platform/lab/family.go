package lab

// A lab's IP families: the pods' IPv6 network and addresses, the
// IPv6 side of the lab's own wiring (uplinks, underlay) and what every
// namespace of an IPv6 lab is told before its first interface exists.

import (
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// DefaultPodCIDR6 is the pods' IPv6 network of ipv6 and dual labs (kind's
// dual-stack pod range): pod-a fd00:10:244::a, pod-b fd00:10:244::b.
const DefaultPodCIDR6 = "fd00:10:244::/64"

// The IPv6 side of the lab's own wiring, beside 10.10.0.0/24 and
// 10.20.0.0/24: the nodes' LAN in the ext namespace (fd00:10:10::1 the
// nodes' default gateway, node i fd00:10:10::(11+i)) and the node-to-node
// underlay (fd00:10:20::1, ::2).
var (
	uplinkNet6   = mustCIDR("fd00:10:10::/64")
	underlayNet6 = mustCIDR("fd00:10:20::/64")
)

// maxPrefix6 is the longest IPv6 pod prefix: a /120 holds 256 addresses,
// as a /24 does.
const maxPrefix6 = 120

// ipv6Sysctls are set, in every namespace of a lab with IPv6, before any
// interface exists: IPv6 on (link-local addresses, NDP) without what made
// 1000-pod labs slow when every interface of a bridge flooded its IPv6
// chatter to every other: no duplicate address detection (accept_dad 0,
// dad_transmits 0: an address is usable at once and sends no neighbour
// solicitation), no router solicitations (there is no router to find:
// routes are static) and no router advertisements accepted. Measured in
// docs/labs.md.
var ipv6Sysctls = []string{
	"net.ipv6.conf.all.accept_dad", "0", "net.ipv6.conf.default.accept_dad", "0",
	"net.ipv6.conf.default.dad_transmits", "0",
	"net.ipv6.conf.all.router_solicitations", "0", "net.ipv6.conf.default.router_solicitations", "0",
	"net.ipv6.conf.all.accept_ra", "0", "net.ipv6.conf.default.accept_ra", "0",
}

// sysctlsFor are the sysctls of every namespace of a lab of family f.
func sysctlsFor(f family.Family) []string {
	if !f.HasIPv6() {
		return nsSysctls
	}
	return ipv6Sysctls
}

// CheckFamily is checkFamily on a copy of s: a run checks every mode's
// labs against its family before it builds any.
func (s Spec) CheckFamily(m modes.Mode) error { return s.checkFamily(m) }

// checkFamily is Validate for the lab's families: the family is known, the
// mode and kernel carry it, the networks are of the right family and size
// and clash with nothing of the lab's own.
func (s *Spec) checkFamily(m modes.Mode) error {
	f, err := family.Parse(string(s.Family))
	if err != nil {
		return field.Errorf("ip_family", "{ip_family} %q is not a family: use ipv4, ipv6 or dual", s.Family)
	}
	s.Family = f
	if _, n, err := net.ParseCIDR(s.PodCIDR); err == nil && n.IP.To4() == nil {
		return field.Errorf("pod_cidr", "{pod_cidr} %s is an IPv6 network: give it as {pod_cidr6}, with {ip_family} ipv6 or dual", s.PodCIDR)
	}
	if !f.HasIPv6() {
		if s.PodCIDR6 != "" {
			return field.Errorf("pod_cidr6", "{pod_cidr6} %s is for IPv6 pods: add {ip_family} ipv6 or dual, or leave it out", s.PodCIDR6)
		}
		return nil
	}
	if !m.IPv6 {
		return field.Errorf("ip_family", "mode %s carries IPv4 only: use {ip_family} ipv4, or a mode with IPv6 (%s)", m.Name, strings.Join(modes.IPv6Modes(), ", "))
	}
	if err := kernel.Check(kernel.IPv6); err != nil {
		return err
	}
	if s.PodCIDR6 == "" {
		s.PodCIDR6 = DefaultPodCIDR6
	}
	n, err := podNet6(s.PodCIDR6)
	if err != nil {
		return err
	}
	for _, own := range []*net.IPNet{uplinkNet6, underlayNet6} {
		if n.Contains(own.IP) || own.Contains(n.IP) {
			return field.Errorf("pod_cidr6", "address clash: {pod_cidr6} %s overlaps vnetlab's node network %s: pick another {pod_cidr6}", s.PodCIDR6, own)
		}
	}
	return nil
}

// podNet6 parses an IPv6 pod network, refusing one too small for a lab.
func podNet6(cidr string) (*net.IPNet, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil || n.IP.To4() != nil {
		return nil, field.Errorf("pod_cidr6", "{pod_cidr6} %q is not an IPv6 CIDR (example: %s)", cidr, DefaultPodCIDR6)
	}
	if ones, _ := n.Mask.Size(); ones > maxPrefix6 {
		return nil, field.Errorf("pod_cidr6", "{pod_cidr6} %s is too small (a /%d): use a /%d or shorter prefix, e.g. %s", cidr, ones, maxPrefix6, DefaultPodCIDR6)
	}
	return n, nil
}

// checkPods6 checks the pods' IPv6 addresses (check does their IPv4 ones).
func (s *Spec) checkPods6() error {
	if !s.Family.HasIPv6() {
		for _, p := range s.Pods {
			if p.IP6 != "" {
				return field.Errorf("ip_family", "pod %s has the IPv6 address %s in an IPv4 lab: add {ip_family} dual or ipv6", p.Name, p.IP6)
			}
		}
		return nil
	}
	n, err := podNet6(s.PodCIDR6)
	if err != nil {
		return err
	}
	if err := s.checkPodAddrs(n, "pod_cidr6", s.PodCIDR6, func(p PodSpec) string { return p.IP6 }); err != nil {
		return err
	}
	for _, p := range s.Pods {
		if !s.Family.HasIPv4() && p.IP != "" {
			return field.Errorf("ip_family", "pod %s has the IPv4 address %s in an IPv6-only lab: use {ip_family} dual, or leave it out", p.Name, p.IP)
		}
	}
	if s.NodeCount() > 1 {
		return s.checkPlacement(n, s.PodCIDR6, func(p PodSpec) string { return p.IP6 })
	}
	return nil
}

// PodsFor makes n pods named pod-a.. for a lab like s: addresses from
// .10 (::a) upwards of each node's share of the pod networks of s's
// families (IPv4 pods only for a spec without a family).
func PodsFor(n int, s Spec) ([]PodSpec, error) {
	f := s.Family.Or()
	cidr := s.PodCIDR
	if cidr == "" {
		cidr = DefaultPodCIDR
	}
	var pods []PodSpec
	var err error
	if f.HasIPv4() {
		if pods, err = DefaultPodSpecs(n, cidr, s.NodeCount()); err != nil {
			return nil, err
		}
	}
	if !f.HasIPv6() {
		return pods, nil
	}
	cidr6 := s.PodCIDR6
	if cidr6 == "" {
		cidr6 = DefaultPodCIDR6
	}
	pn, err := podNet6(cidr6)
	if err != nil {
		return nil, err
	}
	addrs, err := podAddrs(n, pn, s.NodeCount())
	if err != nil {
		return nil, err
	}
	if pods == nil {
		pods = make([]PodSpec, n)
	}
	for i := range pods {
		pods[i].Name, pods[i].IP6 = PodName(i), addrs[i].String()
	}
	return pods, nil
}

// wireUplinks6 gives the nodes' LAN its IPv6 side: fd00:10:10::1 on the ext
// bridge lan0, the nodes' default IPv6 route, each node's uplink address
// and the ext namespace's route back to each node's IPv6 pods.
func wireUplinks6(env *modes.Env) error {
	lan, err := env.Ext.H.LinkByName("lan0")
	if err != nil {
		return err
	}
	if err := modes.AddrAdd6(env.Ext.H, lan, env.ExtIP6, maskOnes(uplinkNet6)); err != nil {
		return err
	}
	for _, n := range env.Nodes {
		up, err := n.H.LinkByName(env.Uplink)
		if err != nil {
			return err
		}
		if err := modes.AddrAdd6(n.H, up, n.IP6, maskOnes(uplinkNet6)); err != nil {
			return err
		}
		if err := n.H.RouteAdd(&netlink.Route{Gw: env.ExtIP6, LinkIndex: up.Attrs().Index, Family: unix.AF_INET6}); err != nil {
			return fmt.Errorf("%s IPv6 default route: %w", n.Node, err)
		}
		if err := env.Ext.H.RouteAdd(&netlink.Route{Dst: n.PodNet6, Gw: n.IP6, Family: unix.AF_INET6}); err != nil {
			return fmt.Errorf("ext IPv6 route to %s's pods: %w", n.Node, err)
		}
	}
	return nil
}

// wireUnderlay6 gives the node-to-node underlay its IPv6 addresses.
func wireUnderlay6(env *modes.Env) error {
	for i, n := range env.Nodes {
		n.UnderlayIP6 = modes.NthIP(underlayNet6, i+1)
		l, err := n.H.LinkByName(underlayIf)
		if err != nil {
			return err
		}
		if err := modes.AddrAdd6(n.H, l, n.UnderlayIP6, maskOnes(underlayNet6)); err != nil {
			return err
		}
	}
	return nil
}

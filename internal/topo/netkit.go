package topo

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/kernel"
	"github.com/vnetlab/vnetlab/internal/nsutil"
)

// netkit: the device Cilium made to replace veth (kernel 6.7+), routed like
// veth-routed: a netkit pair per pod in L3 mode (no ARP, no MAC: the pod's
// eth0 hands packets straight to the node's end), the pod's default route via
// 169.254.10.24 onlink, a /32 route per pod in the node, ip_forward on,
// FORWARD accepting pod traffic. Created through netlink: Debian 12's
// iproute2 cannot set a netkit's mode or its peer's name.
type netkitMode struct{}

func init() { Register(netkitMode{}) }

func (netkitMode) Name() string { return "netkit" }
func (netkitMode) Summary() string {
	return "netkit pair per pod in L3 mode (Cilium's veth replacement, kernel 6.7+) routed by the node: /32 routes, gw 169.254.10.24 onlink"
}
func (netkitMode) Requires() []kernel.Feature { return []kernel.Feature{kernel.Netkit} }
func (netkitMode) MinPods() int               { return 2 }

func (netkitMode) Build(env *Env) error {
	if err := buildNetkitRouted(env); err != nil {
		return err
	}
	env.Facts = map[string]string{"device": "netkit, L3 mode, policy forward (no programs attached)"}
	return nil
}

// buildNetkitRouted is netkit's routed plumbing, shared with netkit-ebpf.
func buildNetkitRouted(env *Env) error {
	gw := net.ParseIP(VethGateway).To4()
	if err := Sysctls(env.Node.Name, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	if err := IptablesRestore(env.Node.Name, fmt.Sprintf("*filter\n-I FORWARD -s %s -d %s -j ACCEPT\nCOMMIT\n", env.PodNet, env.PodNet)); err != nil {
		return err
	}
	for i, pod := range env.Pods {
		l, err := NetkitToPod(env, pod, HostIfname("nk-", pod.Pod, i))
		if err != nil {
			return err
		}
		if err := PodAddr(pod, env.Prefix(), gw, true); err != nil {
			return err
		}
		if err := env.Node.H.LinkSetUp(l); err != nil {
			return err
		}
		r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: &net.IPNet{IP: pod.IP, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}
		if err := env.Node.H.RouteAdd(r); err != nil {
			return fmt.Errorf("route to %s: %w", pod.Pod, err)
		}
	}
	env.Gateway = VethGateway
	return nil
}

// NetkitToPod creates an L3 netkit pair: the primary (hostName) in the
// node, the peer in the pod as pod.Ifname. Like veth, the peer is created
// in the pod's namespace under its final name.
func NetkitToPod(env *Env, pod *Pod, hostName string) (netlink.Link, error) {
	podNS, err := nsutil.FD(pod.Name)
	if err != nil {
		return nil, err
	}
	defer podNS.Close()
	mtu := pod.MTU
	if mtu == 0 {
		mtu = 1500
	}
	nk := &netlink.Netkit{LinkAttrs: netlink.LinkAttrs{Name: hostName, MTU: mtu}, Mode: netlink.NETKIT_MODE_L3,
		Policy: netlink.NETKIT_POLICY_FORWARD, PeerPolicy: netlink.NETKIT_POLICY_FORWARD}
	nk.SetPeerAttrs(&netlink.LinkAttrs{Name: pod.Ifname, MTU: mtu, Namespace: netlink.NsFd(int(podNS))})
	if err := env.Node.H.LinkAdd(nk); err != nil {
		return nil, fmt.Errorf("netkit %s <-> %s/%s: %w", hostName, pod.Pod, pod.Ifname, err)
	}
	return env.Node.H.LinkByName(hostName)
}

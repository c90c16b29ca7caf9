package modes

import (
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// netkit: the device Cilium made to replace veth (kernel 6.7+), routed like
// veth-routed: a netkit pair per pod in L3 mode (no ARP, no MAC: the pod's
// eth0 hands packets straight to the node's end), the pod's default route via
// 169.254.10.24 onlink, a /32 route per pod in the node, ip_forward on,
// FORWARD accepting pod traffic. Created through netlink: Debian 12's
// iproute2 cannot set a netkit's mode or its peer's name.
func init() {
	Register(Mode{
		Name:     Netkit,
		Seeds:    []Seed{SeedPodModes},
		Summary:  "netkit pair per pod in L3 mode (Cilium's veth replacement, kernel 6.7+) routed by the node: /32 routes, gw 169.254.10.24 onlink",
		Requires: []kernel.Feature{kernel.Netkit},
		Build:    buildNetkit,
		// Routed by the node like veth-routed: node rules see clusterIP
		// traffic. vnetlab's tc programs are not wired to netkit's hooks.
		Services: Services{Reach: ReachNodeNetfilter},
		// routed6, as veth-routed (an L3 netkit has no NDP: the neighbour is
		// NOARP); proven on Debian's 6.12 under qemu, as this machine has no netkit.
		IPv6: true,
	})
}

func buildNetkit(env *Env) error {
	if err := buildRouted(env, "nk-", "netkit", NetkitToPod, false); err != nil {
		return err
	}
	env.Facts = map[string]string{"device": "netkit, L3 mode, policy forward (no programs attached)"}
	return nil
}

// NetkitToPod creates an L3 netkit pair: the primary (hostName) in the
// node, the peer in the pod as pod.Ifname (created there under that name,
// as veth peers are).
func NetkitToPod(env *Env, pod *Pod, hostName string) (netlink.Link, error) {
	return netkitToPod(env, pod, hostName, netlink.NETKIT_MODE_L3)
}

// netkitL2ToPod is NetkitToPod in L2 mode: Ethernet headers and MACs, ARP.
func netkitL2ToPod(env *Env, pod *Pod, hostName string) (netlink.Link, error) {
	return netkitToPod(env, pod, hostName, netlink.NETKIT_MODE_L2)
}

func netkitToPod(env *Env, pod *Pod, hostName string, mode netlink.NetkitMode) (netlink.Link, error) {
	return pairToPod(env, pod, hostName, func(mtu int, podNS netlink.NsFd) netlink.Link {
		nk := &netlink.Netkit{LinkAttrs: netlink.LinkAttrs{Name: hostName, MTU: mtu}, Mode: mode,
			Policy: netlink.NETKIT_POLICY_FORWARD, PeerPolicy: netlink.NETKIT_POLICY_FORWARD}
		nk.SetPeerAttrs(&netlink.LinkAttrs{Name: pod.Ifname, MTU: mtu, Namespace: podNS})
		return nk
	})
}

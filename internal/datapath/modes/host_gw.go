package modes

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// host-gw: flannel's host-gw backend, seed 003's routed alternative to
// bridging across hosts: each node has its own pod subnet on a local bridge
// (cni0, gateway .1 of the subnet) and a route to the other node's pod subnet
// via that node's underlay address. No encapsulation, no shared L2.
func init() {
	Register(Mode{
		Name:      HostGW,
		MaxPods:   bridgePorts("cni0", ""),
		Seeds:     []Seed{SeedBridgeOVS},
		Summary:   "cross-host (--nodes 2): per-node pod subnet on cni0, routes to the other node's pods via its underlay IP (flannel host-gw)",
		Requires:  []kernel.Feature{kernel.Veth, kernel.Bridge},
		Build:     buildHostGW,
		MinNodes:  2,
		CrossHost: true,
		IPv6:      true,
	})
}

func buildHostGW(env *Env) error {
	if len(env.Nodes) < 2 {
		return fmt.Errorf("host-gw routes between nodes: use --nodes 2")
	}
	if err := bridgePerNode(env, "cni0"); err != nil {
		return err
	}
	for i, n := range env.Nodes {
		peer := env.Nodes[1-i]
		l, err := n.H.LinkByName(env.Underlay)
		if err != nil {
			return err
		}
		if err := n.H.RouteAdd(&netlink.Route{Dst: peer.PodNet, Gw: peer.UnderlayIP, LinkIndex: l.Attrs().Index}); err != nil {
			return fmt.Errorf("%s: route to %s via %s: %w", n.Node, peer.PodNet, peer.UnderlayIP, err)
		}
		if env.HasIPv6() {
			if err := hostGWRoute6(n, peer, l); err != nil {
				return err
			}
		}
	}
	env.Facts = map[string]string{"routes": fmt.Sprintf("%s via %s, %s via %s", env.Nodes[1].PodNet, env.Nodes[1].UnderlayIP, env.Nodes[0].PodNet, env.Nodes[0].UnderlayIP)}
	return nil
}

// bridgePerNode gives each node a bridge holding the gateway of its own pod
// subnet with the pods attached (flannel's cni0), ip_forward on and the
// pod-to-pod FORWARD accept rule.
func bridgePerNode(env *Env, name string) error {
	for i := range env.Nodes {
		sub := env.ForNode(i)
		br, err := BridgeWithGateway(sub, name, sub.Prefix())
		if err != nil {
			return err
		}
		if err := AttachPodsToBridge(sub, br, NthIP(sub.PodNet, 1)); err != nil {
			return err
		}
		if err := Sysctls(sub.Node.Name, "net.ipv4.ip_forward", "1"); err != nil {
			return err
		}
		if err := IptablesRestore(sub.Node.Name, podForwardRules(env.PodNet)); err != nil {
			return err
		}
		if env.HasIPv6() {
			if err := bridgePerNode6(sub.Node.Name, env.PodNet6); err != nil {
				return err
			}
		}
	}
	env.Gateway = "per node: .1 of its subnet"
	if env.HasIPv6() {
		env.Gateway6 = "per node: ::1 of its subnet"
	}
	return nil
}

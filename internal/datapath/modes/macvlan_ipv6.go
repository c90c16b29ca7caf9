package modes

import "github.com/vishvananda/netlink"

// macvlan over IPv6, as over IPv4 (seed 002's recipe, buildSubInterfaces):
// each pod has its address with the IPv6 pod network's prefix and a default
// route via ::1 of it, held by the node's shim; the node's ip6tables
// MASQUERADE makes pod-to-pod replies come back through the node, as
// iptables' does for IPv4. ipvlan shares this code; it is proven on Debian's
// kernel under qemu (make test-kernels), as this machine has no ipvlan.

// subInterfaceShim6 gives the shim the pods' IPv6 gateway, turns IPv6
// forwarding on and masquerades pod-to-pod IPv6 through the node.
func subInterfaceShim6(env *Env, shim netlink.Link) error {
	if err := nodeGateway6(env, shim); err != nil {
		return err
	}
	return Ip6tablesRestore(env.Node.Name, podMasqueradeRules(env.PodNet6))
}

// nodeGateway6 gives the node's link the pods' IPv6 gateway (::1 of the
// IPv6 pod network, with its prefix) and turns IPv6 forwarding on.
func nodeGateway6(env *Env, link netlink.Link) error {
	gw := NthIP(env.PodNet6, 1)
	if err := AddrAdd6(env.Node.H, link, gw, env.Prefix6()); err != nil {
		return err
	}
	env.Gateway6 = gw.String()
	return Forwarding6(env.Node.Name)
}

// nodeGatewayPod6 gives a pod its IPv6 address, with the IPv6 pod network's
// prefix, and a default route via nodeGateway6's gateway (the macvlan/ipvlan
// shim, the tap switch's gateway port).
func nodeGatewayPod6(env *Env, pod *Pod) error {
	return PodAddr6(pod, env.Prefix6(), NthIP(env.PodNet6, 1))
}

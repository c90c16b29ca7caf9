package modes

import (
	"github.com/vishvananda/netlink"
)

// The bridge modes over IPv6 (bridge, docker-nat, host-gw, vxlan): the
// bridge holds the pods' IPv6 gateway (::1 of the node's share) with the
// pod network's prefix, whose prefix route leads to the pods; each pod has
// its address with that prefix and a default route via the gateway, and
// finds its neighbours on the bridge by NDP.

// bridgeGateway6 gives br the pods' IPv6 gateway, the first address of
// env's IPv6 pod network, with prefix (that network's, or the whole lab's
// when pods of several nodes share one segment), as BridgeWithGateway does
// for IPv4.
func bridgeGateway6(env *Env, br netlink.Link, prefix int) error {
	gw := NthIP(env.PodNet6, 1)
	if err := AddrAdd6(env.Node.H, br, gw, prefix); err != nil {
		return err
	}
	env.bridgeGW6, env.Gateway6 = gw, gw.String()
	return nil
}

// bridgePod6 gives a bridge port's pod its IPv6 address and default route.
func bridgePod6(env *Env, pod *Pod) error {
	gw := env.bridgeGW6
	if gw == nil { // the CNI plugin: the bridge was made by an earlier call
		gw = NthIP(env.PodNet6, 1)
	}
	return PodAddr6(pod, env.Prefix6(), gw)
}

// bridgeNode6: IPv6 forwarding, and bridged IPv6 through ip6tables as
// bridged IPv4 goes through iptables (bridge_nf_call_iptables).
func bridgeNode6(ns string, nf bool) error {
	if err := Forwarding6(ns); err != nil {
		return err
	}
	return Sysctls(ns, "net.bridge.bridge-nf-call-ip6tables", onOff(nf))
}

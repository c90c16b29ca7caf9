package modes

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// bridge: seed 002's "bridge方式", flannel/docker0
// style: pods' veths are ports of br0, which holds the gateway 192.168.10.1;
// net.bridge.bridge-nf-call-iptables decides whether bridged packets cross
// the node's netfilter hooks (the seed measured 65 on vs 77 Gbit/s off).
func init() {
	Register(Mode{
		Name: Bridge,
		// With --nodes 2, each node's br0 enslaves the underlay eth1 too.
		MaxPods: func(nodes int, opts map[string]string) (int, string) {
			if nodes > 1 {
				return bridgePorts("br0", "the underlay eth1")(nodes, opts)
			}
			return bridgePorts("br0", "")(nodes, opts)
		},
		Seeds:    []Seed{SeedPodModes, SeedBridgeOVS},
		Summary:  "veth per pod on a Linux bridge holding the gateway .1 (seed 002, flannel); option bridge_nf_call_iptables",
		Requires: []kernel.Feature{kernel.Veth, kernel.Bridge, kernel.BrNetfilter},
		Options: []Option{{Name: bridgeNF, Default: "on", Check: OnOff(bridgeNF),
			Help: "on: bridged packets traverse iptables (needed for clusterIP); off: pure L2 switching"}},
		Build:     buildBridge,
		Attach:    bridgeAttach,
		CrossHost: true,
		Services: Services{Reach: ReachNodeNetfilter, EBPF: EBPFNodeVeth,
			NetfilterCaveat: bridgeNetfilterCaveat},
		Policies: Policies{NodeFilter: true, NodeFilterOff: bridgePolicyOff, PodIf: true},
		IPv6:     true,
	})
}

const bridgeNF = "bridge_nf_call_iptables"

// bridgeNetfilterCaveat: with bridge-nf-call-iptables=0 the backend's
// replies are switched by the bridge straight to the client without
// crossing netfilter, so conntrack never turns their source back into the
// clusterIP; the client sees a reply from the pod IP and resets it. The
// kernel decides this; vnetlab reports it rather than hiding it.
func bridgeNetfilterCaveat(options map[string]string) string {
	if on, err := ParseOnOff(bridgeNF, options[bridgeNF], true); err == nil && !on {
		return "expected to fail: bridge_nf_call_iptables=off, so replies are bridged past netfilter and never reverse-NATed to the clusterIP (seed 002: the switch must stay on for clusterIP)"
	}
	return ""
}

// bridgePolicyOff: with bridge-nf-call-iptables=0 packets between two pods
// of the bridge never reach netfilter, so node-side policy rules miss them.
func bridgePolicyOff(options map[string]string) string {
	if on, err := ParseOnOff(bridgeNF, options[bridgeNF], true); err == nil && !on {
		return "bridge_nf_call_iptables=off: packets between pods are bridged past the node's netfilter, so its policy rules would never see them (keep the option on)"
	}
	return ""
}

func buildBridge(env *Env) error {
	nf, err := env.BoolOption(bridgeNF, true)
	if err != nil {
		return err
	}
	if len(env.Nodes) > 1 {
		return buildBridgeAcrossNodes(env, nf)
	}
	if err := AttachAll(bridgeAttach)(env); err != nil {
		return err
	}
	env.Facts = map[string]string{"bridge_nf_call_iptables": onOffWord(nf)}
	return nil
}

// bridgeName is the node's bridge of mode bridge.
const bridgeName = "br0"

// bridgeAttach is mode bridge on one node, a pod at a time.
var bridgeAttach = &Attach{
	Node: func(env *Env) error {
		nf, err := env.BoolOption(bridgeNF, true)
		if err != nil {
			return err
		}
		gw := NthIP(env.PodNet, 1)
		if _, err := env.Node.H.LinkByName(bridgeName); err != nil {
			br, err := BridgeWithGateway(env, bridgeName, 32)
			if err != nil {
				return err
			}
			// ip route add 192.168.10.0/24 via 192.168.10.1 dev br0 scope link: the
			// gateway is the node's own address, so this is a link route from it.
			if err := env.Node.H.RouteAdd(&netlink.Route{LinkIndex: br.Attrs().Index, Dst: env.PodNet, Scope: netlink.SCOPE_LINK, Src: gw}); err != nil {
				return fmt.Errorf("route to pods via %s: %w", bridgeName, err)
			}
		}
		env.Gateway = gw.String()
		if env.HasIPv6() {
			// Also when an earlier pod's call made the bridge (the CNI plugin).
			env.Gateway6 = NthIP(env.PodNet6, 1).String()
			if err := bridgeNode6(env.Node.Name, nf); err != nil {
				return err
			}
		}
		return Sysctls(env.Node.Name, "net.ipv4.ip_forward", "1", "net.bridge.bridge-nf-call-iptables", onOff(nf))
	},
	Pod: func(env *Env, pod *Pod, i int) error {
		br, err := env.Node.H.LinkByName(bridgeName)
		if err != nil {
			return fmt.Errorf("bridge %s in %s: %w", bridgeName, env.Node.Name, err)
		}
		return attachPodToBridge(env, pod, i, br, NthIP(env.PodNet, 1))
	},
	Detach: func(env *Env, pod *Pod) error { return deleteHostLink(env, pod.HostIfname("veth-", 0)) },
	Check: func(env *Env, pod *Pod) error {
		host, err := checkPodLink(env, pod, pod.HostIfname("veth-", 0), "veth")
		if err != nil {
			return err
		}
		br, err := env.Node.H.LinkByName(bridgeName)
		if err != nil || host.Attrs().MasterIndex != br.Attrs().Index {
			return fmt.Errorf("%s of %s is not a port of %s", host.Attrs().Name, pod.Pod, bridgeName)
		}
		return nil
	},
}

// BridgeWithGateway creates a bridge in the node holding the pods' gateway
// (.1 of the pod network) with the given prefix length, up.
func BridgeWithGateway(env *Env, name string, prefix int) (netlink.Link, error) {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := env.Node.H.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("bridge %s: %w", name, err)
	}
	gw := NthIP(env.PodNet, 1)
	if err := env.Node.H.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: gw, Mask: net.CIDRMask(prefix, 32)}}); err != nil {
		return nil, fmt.Errorf("gateway %s on %s: %w", gw, name, err)
	}
	if env.HasIPv6() {
		if err := bridgeGateway6(env, br, env.Prefix6()); err != nil {
			return nil, err
		}
	}
	if err := env.Node.H.LinkSetUp(br); err != nil {
		return nil, err
	}
	env.Gateway = gw.String()
	return env.Node.H.LinkByName(name)
}

// AttachPodsToBridge gives each pod a veth whose node end is a bridge port,
// the pod address and a default route via gw onlink.
func AttachPodsToBridge(env *Env, br netlink.Link, gw net.IP) error {
	for i, pod := range env.Pods {
		if err := attachPodToBridge(env, pod, i, br, gw); err != nil {
			return err
		}
	}
	return nil
}

// attachPodToBridge gives one pod a veth whose node end is a port of br.
func attachPodToBridge(env *Env, pod *Pod, i int, br netlink.Link, gw net.IP) error {
	host := pod.HostIfname("veth-", i)
	l, err := VethToPod(env, pod, host)
	if err != nil {
		return err
	}
	if err := PodAddr(pod, env.Prefix(), gw, true); err != nil {
		return err
	}
	if pod.IP6 != nil {
		if err := bridgePod6(env, pod); err != nil {
			return err
		}
	}
	if err := env.Node.H.LinkSetMaster(l, br); err != nil {
		return fmt.Errorf("%s master %s: %w", host, br.Attrs().Name, err)
	}
	return env.Node.H.LinkSetUp(l)
}

func onOff(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func onOffWord(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// buildBridgeAcrossNodes: seed 003's "no encapsulation" across hosts: on each node br0 enslaves the underlay NIC and
// the pods' veths, so pods of both nodes share one L2 segment. Each node's br0
// holds that node's gateway address (.1 of its share) with the whole pod
// network's prefix; pods use the whole prefix too, so they reach each other
// directly at L2.
func buildBridgeAcrossNodes(env *Env, nf bool) error {
	for i := range env.Nodes {
		sub := env.ForNode(i)
		gw := NthIP(sub.PodNet, 1)
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
		if err := sub.Node.H.LinkAdd(br); err != nil {
			return fmt.Errorf("%s: bridge br0: %w", env.Nodes[i].Node, err)
		}
		if err := sub.Node.H.AddrAdd(br, &netlink.Addr{IPNet: &net.IPNet{IP: gw, Mask: env.PodNet.Mask}}); err != nil {
			return err
		}
		if env.HasIPv6() { // the node's gateway with the whole network's prefix, as for IPv4
			if err := bridgeGateway6(sub, br, env.Prefix6()); err != nil {
				return err
			}
			sub.PodNet6 = env.PodNet6 // pods see the whole network as on-link
		}
		if err := sub.Node.H.LinkSetUp(br); err != nil {
			return err
		}
		up, err := sub.Node.H.LinkByName(env.Underlay)
		if err != nil {
			return err
		}
		if err := sub.Node.H.LinkSetMaster(up, br); err != nil {
			return fmt.Errorf("%s: underlay into br0: %w", env.Nodes[i].Node, err)
		}
		sub.PodNet = env.PodNet // pods see the whole network as on-link
		if err := AttachPodsToBridge(sub, br, gw); err != nil {
			return err
		}
		if err := Sysctls(sub.Node.Name, "net.ipv4.ip_forward", "1", "net.bridge.bridge-nf-call-iptables", onOff(nf)); err != nil {
			return err
		}
		if env.HasIPv6() {
			if err := bridgeNode6(sub.Node.Name, nf); err != nil {
				return err
			}
		}
	}
	env.Gateway = "per node: .1 of its share"
	if env.HasIPv6() {
		env.Gateway6 = "per node: ::1 of its share"
	}
	env.Facts = map[string]string{"bridge_nf_call_iptables": onOffWord(nf), "underlay": "enslaved in br0 on both nodes"}
	return nil
}

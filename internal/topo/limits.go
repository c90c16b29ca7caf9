package topo

import "fmt"

// BridgeMaxPorts is how many ports a Linux bridge holds (BR_MAX_PORTS in
// the kernel's net/bridge/br_private.h): enslaving one more fails with
// EXFULL, which iproute2 prints as "exchange full".
const BridgeMaxPorts = 1024

// podLimit says how many pods a mode holds with the given number of nodes
// and options, and why.
type podLimit func(nodes int, opts map[string]string) (most int, why string)

// podLimits holds every mode with a hard kernel limit on its pods. Modes
// not listed have none below what a pod CIDR holds: the kernel does not
// count routed veths, macvlan children or TAPs per parent, and Open
// vSwitch takes 65535 ports.
var podLimits = map[string]podLimit{
	"bridge": func(nodes int, _ map[string]string) (int, string) {
		if nodes > 1 {
			return bridgePorts("br0", nodes, "the underlay eth1")
		}
		return bridgePorts("br0", nodes, "")
	},
	"docker-nat": func(nodes int, _ map[string]string) (int, string) { return bridgePorts("docker0", nodes, "") },
	"host-gw":    func(nodes int, _ map[string]string) (int, string) { return bridgePorts("cni0", nodes, "") },
	"vxlan":      func(nodes int, _ map[string]string) (int, string) { return bridgePorts("cni0", nodes, "") },
	"ovs": func(nodes int, opts map[string]string) (int, string) {
		if on, err := (&Env{Options: opts}).BoolOption("linux_bridge", false); err != nil || !on {
			return 0, ""
		}
		return bridgePorts("qbr0", nodes, "the veth qvb0 to Open vSwitch")
	},
}

// bridgePorts is the limit of a mode that makes each pod a port of one
// Linux bridge per node, next to one port of its own if other names it.
func bridgePorts(bridge string, nodes int, other string) (int, string) {
	perNode := BridgeMaxPorts
	why := fmt.Sprintf("each pod is a port of the Linux bridge %s, which holds at most %d ports (the kernel's BR_MAX_PORTS)", bridge, BridgeMaxPorts)
	if other != "" {
		perNode--
		why += ", " + other + " being one of them"
	}
	if nodes > 1 {
		why += fmt.Sprintf(", with one %s per node", bridge)
	}
	return perNode * max(nodes, 1), why
}

// CheckPodCount refuses, before anything is built, more pods than mode
// can hold with the given nodes and options, saying why and what to do.
func CheckPodCount(mode string, pods, nodes int, opts map[string]string) error {
	limit, ok := podLimits[mode]
	if !ok {
		return nil
	}
	most, why := limit(nodes, opts)
	if most == 0 || pods <= most {
		return nil
	}
	return fmt.Errorf("mode %s holds at most %d pods here, not %d: %s; use --pods %d or fewer, or a routed mode without this limit (veth-routed, veth-ebpf)",
		mode, most, pods, why, most)
}

package modes

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// BridgeMaxPorts is how many ports a Linux bridge holds (BR_MAX_PORTS in
// the kernel's net/bridge/br_private.h): enslaving one more fails with
// EXFULL, which iproute2 prints as "exchange full".
const BridgeMaxPorts = 1024

// PodLimit says how many pods a mode holds with the given number of nodes
// and options, and why (0: no limit with these options). Modes without one
// have no limit below what a pod CIDR holds: the kernel does not count
// routed veths, macvlan children or TAPs per parent, and Open vSwitch
// takes 65535 ports.
type PodLimit func(nodes int, opts map[string]string) (most int, why string)

// bridgePorts is the PodLimit of a mode that makes each pod a port of one
// Linux bridge per node (named bridge), next to one port of its own when
// other names it.
func bridgePorts(bridge, other string) PodLimit {
	return func(nodes int, _ map[string]string) (int, string) {
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
}

// CheckPodCount refuses, before anything is built, more pods than the mode
// can hold with the given nodes and options, saying why and what to do.
func (m Mode) CheckPodCount(pods, nodes int, opts map[string]string) error {
	if m.MaxPods == nil {
		return nil
	}
	most, why := m.MaxPods(nodes, opts)
	if most == 0 || pods <= most {
		return nil
	}
	return field.Errorf("pods", "mode %s holds at most %d pods here, not %d: %s; use {pods} %d or fewer, or a routed mode without this limit (%s, %s)",
		m.Name, most, pods, why, most, VethRouted, VethEBPF)
}

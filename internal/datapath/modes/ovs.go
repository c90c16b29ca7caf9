package modes

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// ovs: seed 003's "ovs / ns - ns（veth）":
//
//	ovs-vsctl add-br ovsbr
//	ip link add ns1-veth-in type veth peer name ns1-veth-out
//	ip link set ns1-veth-in netns ns1
//	ovs-vsctl add-port ovsbr ns1-veth-out
//
// on vnetlab's private Open vSwitch (ovs_switch.go). The bridge's local port
// holds the pods' gateway, as br0 does in the bridge mode. On the netdev
// datapath the pods' TX checksum offload is switched off, else vswitchd
// forwards TCP segments whose checksum nobody filled in and the receiver
// drops them (docs/labs.md: 0 -> 1.33 Gbit/s), unless userspace_tso=on.
//
// linux_bridge=on is the seed's "ovs-bridge" (em1 - - - vtep - ovsbr -
// bridge), OpenStack's hybrid plug: pods' veths are ports of a Linux bridge
// qbr0, joined to ovsbr by the veth pair qvb0/qvo0, so every frame crosses
// both switches (and the node's iptables, bridge-nf-call-iptables being on
// in a new namespace: the reason OpenStack plugged VMs this way).
func init() {
	Register(Mode{
		Name: OVS,
		// linux_bridge=on: pods on qbr0, with the veth qvb0 to Open vSwitch.
		MaxPods: func(nodes int, opts map[string]string) (int, string) {
			if on, err := (&Env{Options: opts}).BoolOption("linux_bridge", false); err != nil || !on {
				return 0, ""
			}
			return bridgePorts("qbr0", "the veth qvb0 to Open vSwitch")(nodes, opts)
		},
		Seeds:    []Seed{SeedBridgeOVS},
		Summary:  "veth per pod as ports of an Open vSwitch bridge holding the gateway .1 (seed 003); --nodes 2: underlay or vxlan port; options datapath, userspace_tso, encap",
		Requires: []kernel.Feature{kernel.Veth},
		Usable:   OVSInstalled,
		Detail:   DatapathDetail,
		Options: append(ovsOptions(), Option{Name: "linux_bridge", Default: "off", Check: OnOff("linux_bridge"),
			Help: "on: pods' veths on a Linux bridge qbr0 joined to ovsbr by the veth pair qvb0/qvo0 (seed 003's ovs-bridge, OpenStack hybrid plug)"}),
		Build: buildOVS,
		IPv6:  true,
		// With --nodes 2 each node runs its own switch (ovs_cross.go).
		CrossHost: true,
	})
}

func buildOVS(env *Env) error {
	hybrid, err := env.BoolOption("linux_bridge", false)
	if err != nil {
		return err
	}
	attach := attachVethPorts
	if hybrid {
		attach = attachViaLinuxBridge
	}
	if len(env.Nodes) > 1 {
		err = buildOVSAcrossNodes(env, attach)
	} else {
		var sw *OVSSwitch
		var c ovsConfig
		if sw, c, err = ovsBridge(env); err != nil {
			return err
		}
		err = attach(env, sw, NthIP(env.PodNet, 1), c.TxOff())
		env.Facts["offload"] = ovsOffloadFact(c, c.TxOff())
	}
	if err == nil && hybrid {
		env.Facts["linux_bridge"] = "pods on qbr0, qvb0 <-> qvo0 to ovsbr"
	}
	return err
}

// attachViaLinuxBridge: pods' veths on qbr0, and qbr0 joined to ovsbr by
// the veth pair qvb0 (on qbr0) / qvo0 (a port of ovsbr).
func attachViaLinuxBridge(env *Env, sw *OVSSwitch, gw net.IP, txOff bool) error {
	h := env.Node.H
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "qbr0"}}); err != nil {
		return fmt.Errorf("bridge qbr0: %w", err)
	}
	qbr, err := h.LinkByName("qbr0")
	if err != nil {
		return err
	}
	mtu := 1500
	if len(env.Pods) > 0 && env.Pods[0].MTU != 0 {
		mtu = env.Pods[0].MTU
	}
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "qvb0", MTU: mtu, MasterIndex: qbr.Attrs().Index}, PeerName: "qvo0"}); err != nil {
		return fmt.Errorf("veth qvb0 <-> qvo0: %w", err)
	}
	for _, name := range []string{"qbr0", "qvb0", "qvo0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return err
		}
		if err := h.LinkSetUp(l); err != nil {
			return err
		}
		if txOff && name != "qbr0" {
			if err := SetTxChecksum(env.Node.Name, name, false); err != nil {
				return err
			}
		}
	}
	if err := AttachPodsToBridge(env, qbr, gw); err != nil {
		return err
	}
	if txOff {
		for i, pod := range env.Pods {
			if err := SetTxChecksum(pod.Name, pod.Ifname, false); err != nil {
				return err
			}
			if err := SetTxChecksum(env.Node.Name, HostIfname("veth-", pod.Pod, i), false); err != nil {
				return err
			}
		}
	}
	_, err = sw.Vsctl("add-port", "ovsbr", "qvo0")
	return err
}

// attachVethPorts gives each of env's pods a veth whose node end is a port
// of ovsbr, and a default route via gw.
func attachVethPorts(env *Env, sw *OVSSwitch, gw net.IP, txOff bool) error {
	args := []string{}
	for i, pod := range env.Pods {
		host := HostIfname("veth-", pod.Pod, i)
		l, err := VethToPod(env, pod, host)
		if err != nil {
			return err
		}
		if err := ovsPodAddrs(env, pod, gw); err != nil {
			return err
		}
		if err := env.Node.H.LinkSetUp(l); err != nil {
			return err
		}
		if txOff {
			// Both ends, as measured by hand: the pod end is the one that matters
			// (its stack sends checksum-partial segments); the node end keeps
			// frames from the node's stack honest too.
			if err := SetTxChecksum(pod.Name, pod.Ifname, false); err != nil {
				return err
			}
			if err := SetTxChecksum(env.Node.Name, host, false); err != nil {
				return err
			}
		}
		if len(args) > 0 {
			args = append(args, "--")
		}
		args = append(args, "add-port", "ovsbr", host)
	}
	// One transaction for every port: one reconfiguration of vswitchd.
	_, err := sw.Vsctl(args...)
	return err
}

func ovsOffloadFact(c ovsConfig, txOff bool) string {
	switch {
	case c.Datapath == DatapathKernel:
		return "unchanged (kernel datapath)"
	case c.TSO:
		return "unchanged; OVS userspace TSO on"
	case txOff:
		return "TX checksum (so TSO) off on the veths"
	}
	return "unchanged"
}

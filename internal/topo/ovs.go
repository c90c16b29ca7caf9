package topo

import (
	"github.com/vnetlab/vnetlab/internal/kernel"
)

// ovs: seed 003 (003_9b52356141afa5f9.txt) "ovs / ns - ns（veth）":
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
// drops them (DESIGN.md: 0 -> 1.33 Gbit/s), unless userspace_tso=on.
type ovsMode struct{}

func init() { Register(ovsMode{}) }

func (ovsMode) Name() string { return "ovs" }
func (ovsMode) Summary() string {
	return "veth per pod as ports of an Open vSwitch bridge holding the gateway .1 (seed 003); options datapath, userspace_tso"
}
func (ovsMode) Requires() []kernel.Feature { return []kernel.Feature{kernel.Veth} }
func (ovsMode) Usable() error              { return OVSInstalled() }
func (ovsMode) Detail() string             { return DatapathDetail() }
func (ovsMode) MinPods() int               { return 2 }
func (ovsMode) Options() []Option          { return ovsOptions() }

func (ovsMode) Build(env *Env) error {
	sw, tso, err := ovsBridge(env)
	if err != nil {
		return err
	}
	txOff := sw.Datapath == DatapathNetdev && !tso
	gw := NthIP(env.PodNet, 1)
	args := []string{}
	for i, pod := range env.Pods {
		host := HostIfname("veth-", pod.Pod, i)
		l, err := VethToPod(env, pod, host)
		if err != nil {
			return err
		}
		if err := PodAddr(pod, env.Prefix(), gw, false); err != nil {
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
	if _, err := sw.Vsctl(args...); err != nil {
		return err
	}
	env.Facts["offload"] = ovsOffloadFact(sw.Datapath, tso, txOff)
	return nil
}

func ovsOffloadFact(dp string, tso, txOff bool) string {
	switch {
	case dp == DatapathKernel:
		return "unchanged (kernel datapath)"
	case tso:
		return "unchanged; OVS userspace TSO on"
	case txOff:
		return "TX checksum (so TSO) off on the veths"
	}
	return "unchanged"
}

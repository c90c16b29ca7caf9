package topo

import (
	"github.com/vnetlab/vnetlab/internal/kernel"
)

// veth-ebpf: veth-routed's plumbing (seed 002's veth mode, Calico's way)
// plus tc programs on the node end of every pod's veth: Cilium's "BPF host
// routing" (kernel 5.10's bpf_redirect_peer) with vnetlab's Service
// translation folded in (seed 002's veth+eBPF). At the node end's ingress,
// host_from_pod translates a clusterIP to its backend, then hands a packet
// for another pod of this node straight to that pod's eth0 ingress: TTL
// minus one, MACs as the node's router would set them, no routing lookup,
// no netfilter, no backlog queue in the node. Everything else (the node,
// the outside world) still goes through the node's stack. bpf/host.h and
// docs/ebpf.md have the details.
type vethEBPF struct{}

func init() { Register(vethEBPF{}) }

func (vethEBPF) Name() string { return "veth-ebpf" }
func (vethEBPF) Summary() string {
	return "veth-routed + tc eBPF on the node-side veths: pod-to-pod via bpf_redirect_peer (Cilium's BPF host routing), Services translated in the same program (seed 002 veth+eBPF)"
}
func (vethEBPF) Requires() []kernel.Feature { return []kernel.Feature{kernel.Veth} }
func (vethEBPF) MinPods() int               { return 2 }
func (vethEBPF) Usable() error              { return ebpfUsable() }

// NodeNetfilterNote is what doctor and the docs say about the fast path.
const NodeNetfilterNote = "veth-ebpf: pod-to-pod packets are redirected from one pod's veth straight into the other pod (bpf_redirect_peer): the node's iptables/nftables (FORWARD, conntrack, LOG, policy) never see them, as with Cilium's BPF host routing; traffic to the node or the outside world still crosses the node's stack"

func (vethEBPF) Build(env *Env) error {
	if err := (vethRouted{}).Build(env); err != nil {
		return err
	}
	dp, err := openEBPF(env)
	if err != nil {
		return err
	}
	defer dp.Close()
	for _, pod := range env.Pods {
		pins, err := dp.AttachHostRouting(env.Node.Name, pod.Name, pod.Ifname)
		if terr := env.trackPins(pins); err == nil {
			err = terr
		}
		if err != nil {
			return err
		}
	}
	env.Facts = map[string]string{
		"pod_to_pod": "bpf_redirect_peer from the sender's node-side veth into the receiver (node netfilter bypassed)",
		"services":   "ebpf, in the same tc program (vnetlab svc add)",
	}
	return nil
}

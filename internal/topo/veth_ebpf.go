package topo

import (
	"github.com/vnetlab/vnetlab/internal/dataplane/ebpf"
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
func init() {
	Register(Mode{
		Name:     VethEBPF,
		Seeds:    []Seed{SeedPodModes},
		Summary:  "veth-routed + tc eBPF on the node-side veths: pod-to-pod via bpf_redirect_peer (Cilium's BPF host routing), Services translated in the same program (seed 002 veth+eBPF)",
		Requires: []kernel.Feature{kernel.Veth},
		Usable:   ebpfUsable,
		Build:    buildVethEBPF,
		Services: Services{Reach: ReachModeDataPlane, EBPF: EBPFHostRouting,
			// Cilium's BPF host routing likewise needs its eBPF kube-proxy replacement.
			NoNetfilter: "veth-ebpf delivers pod-to-pod packets with bpf_redirect_peer, past the node's conntrack, so a backend's replies would never be translated back to the clusterIP: use --provider ebpf (folded into the same programs) or ebpf-sock",
			NodeNote:    "veth-ebpf: pod-to-pod packets are redirected from one pod's veth straight into the other pod (bpf_redirect_peer): the node's iptables/nftables (FORWARD, conntrack, LOG, policy) never see them, as with Cilium's BPF host routing; traffic to the node or the outside world still crosses the node's stack"},
	})
}

// attachHostRouting puts the host-routing programs on the node end of every
// pod's pair (veth, netkit) and routes to the pods in the data plane.
func attachHostRouting(env *Env, hook ebpf.Hook) error {
	return attachEach(env, hook, func(dp *ebpf.Plane, pod *Pod) (ebpf.Endpoint, error) {
		return dp.AttachHostRouting(env.Node.Name, pod.Name, pod.Ifname)
	})
}

func buildVethEBPF(env *Env) error {
	if err := buildVethRouted(env); err != nil {
		return err
	}
	if err := attachHostRouting(env, podsHook); err != nil {
		return err
	}
	env.Facts = map[string]string{
		"pod_to_pod": "bpf_redirect_peer from the sender's node-side veth into the receiver (node netfilter bypassed)",
		"services":   "ebpf, in the same tc program (vnetlab svc add)",
	}
	return nil
}

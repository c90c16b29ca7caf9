package modes

import (
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// netkit-ebpf: veth-ebpf's host routing on netkit pairs (kernel 6.7+): a
// netkit per pod in L2 mode (vnetlab's programs read Ethernet headers; an
// L3 netkit has none), proxy_arp for the gateway, and the host-routing and
// Service programs on each primary's tcx ingress and egress. A packet from a
// pod enters its primary's ingress, where host_from_pod translates a
// clusterIP and hands a packet for another pod straight into that pod with
// bpf_redirect_peer, as on veth. Not netkit's own hooks: bpf_redirect_peer
// works from tc ingress only, so programs there would need bpf_redirect to
// the target's primary instead.
func init() {
	Register(Mode{
		Name:     NetkitEBPF,
		Seeds:    []Seed{SeedPodModes},
		Summary:  "netkit pair per pod in L2 mode (kernel 6.7+) + vnetlab's host-routing and Service programs on each primary (tcx): pod-to-pod via bpf_redirect_peer, as veth-ebpf",
		Requires: []kernel.Feature{kernel.Netkit},
		IPv6:     true, // veth-ebpf's IPv6 wiring on netkit (L2 mode answers NDP for fe80::1); host6.h routes it
		Usable:   ebpfUsable,
		Build:    buildNetkitEBPF,
		Policies: Policies{NoNodeFilter: "netkit-ebpf redirects pod-to-pod packets straight into the other pod (bpf_redirect_peer), past the node's netfilter, so node-side policy rules would not see them"},
		Services: Services{Reach: ReachModeDataPlane, EBPF: EBPFHostRouting,
			NoNetfilter: "netkit-ebpf delivers pod-to-pod packets with bpf_redirect_peer, past the node's conntrack, as veth-ebpf: use --provider ebpf or ebpf-sock",
			NodeNote:    "netkit-ebpf: pod-to-pod packets are redirected from one pod's netkit straight into the other pod (bpf_redirect_peer): the node's iptables/nftables never see them; traffic to the node or the outside world still crosses the node's stack"},
	})
}

func buildNetkitEBPF(env *Env) error {
	if err := buildRouted(env, "nk-", "netkit", netkitL2ToPod, true); err != nil {
		return err
	}
	// tcx, as its summary says: netkit-ebpf has not been measured with tc.
	if err := attachHostRouting(env, tcbpf.HookTCX); err != nil {
		return err
	}
	env.Facts = map[string]string{
		"device":     "netkit, L2 mode",
		"pod_to_pod": "bpf_redirect_peer from the sender's netkit primary (tcx ingress) into the receiver (node netfilter bypassed)",
		"services":   "ebpf, in the same tc program (vnetlab svc add)",
	}
	return nil
}

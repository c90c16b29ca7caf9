package modes

import (
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// macvlan-ebpf: seed 002's ipvlan+eBPF design on the macvlan this kernel
// has (no ipvlan here): macvlan's plumbing (bridge-mode children of the
// node uplink, the node's gateway shim) plus vnetlab's Service programs on
// each pod's own eth0. A clusterIP is translated as the packet leaves the
// client pod and, since macvlan delivers by MAC, addressed to the backend
// pod's MAC: Service traffic never reaches the node (plain macvlan sends
// it to the shim, through the node's iptables and back, seed 002's
// 83 -> 62 Gbit/s). Replies are translated back at the client's eth0.
func init() {
	Register(Mode{
		Name:     MacvlanEBPF,
		Seeds:    []Seed{SeedPodModes},
		Summary:  "macvlan + tc eBPF on each pod's eth0: clusterIP translated in the pod and sent to the backend's MAC, never through the node (seed 002 ipvlan+eBPF, on macvlan)",
		Requires: []kernel.Feature{kernel.Macvlan},
		Usable:   ebpfUsable,
		Build:    buildMacvlanEBPF,
		IPv6:     true, // macvlan's IPv6 wiring; IPv6 Service traffic addressed to the backend's MAC, as IPv4's
		Policies: Policies{NoNodeFilter: "macvlan-ebpf pods' packets to each other are switched inside the parent link (and Service packets addressed to the backend's MAC), never crossing the node's netfilter, so node-side policy rules would not see them"},
		Services: Services{Reach: ReachModeDataPlane, EBPF: EBPFPodL2,
			NoNetfilter: "macvlan-ebpf is macvlan with vnetlab's eBPF Services built in: use --provider ebpf (or mode macvlan for iptables/nftables)",
			NodeNote:    "macvlan-ebpf: clusterIP packets are translated in the client pod and addressed to the backend's MAC: they never reach the node, so its iptables/nftables and conntrack do not see Service traffic either"},
	})
}

func buildMacvlanEBPF(env *Env) error {
	if err := buildMacvlan(env); err != nil {
		return err
	}
	err := attachEach(env, podsHook, func(dp *tcbpf.Plane, pod *Pod) (tcbpf.Endpoint, error) {
		return dp.AttachPodL2(pod.Name, pod.Ifname)
	})
	if err != nil {
		return err
	}
	env.Facts["services"] = "ebpf, on each pod's eth0 (vnetlab svc add); backends reached by MAC"
	return nil
}

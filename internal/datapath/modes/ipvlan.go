package modes

import (
	"fmt"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// ipvlan: seed 002's "ipvlan" and seed 001: like
// macvlan, but every child shares the parent's MAC; l2 or l3 mode. Gated on
// CONFIG_IPVLAN: on kernels without it the mode is reported unavailable.
func init() {
	Register(Mode{
		Name:     Ipvlan,
		Seeds:    []Seed{SeedLatency, SeedPodModes},
		Summary:  "ipvlan children of the node uplink + node shim with gateway and MASQUERADE (seeds 001, 002); option ipvlan_mode l2|l3",
		Requires: []kernel.Feature{kernel.Ipvlan},
		Options: []Option{{Name: "ipvlan_mode", Default: "l2", Help: "l2 (children switched by the parent) or l3 (routed by the parent)",
			Check: func(v string) error {
				if v != "l2" && v != "l3" {
					return fmt.Errorf("option ipvlan_mode=%q: want l2 or l3", v)
				}
				return nil
			}}},
		Build: buildIpvlan,
		// buildSubInterfaces' IPv6 (macvlan_ipv6.go), proven in the stock-kernel guest.
		IPv6: true,
		// The pods' default route leads to the node's shim (seed 002), so
		// node rules see clusterIP traffic (and the shim's MASQUERADE
		// brings replies back); eBPF translates on the pod's own eth0.
		Services: Services{Reach: ReachNodeNetfilter, EBPF: EBPFPodIf},
		Policies: Policies{NoNodeFilter: "packets between ipvlan pods are switched inside their parent link and never cross the node's netfilter (seed 001), so node-side policy rules would not see them"},
	})
}

func buildIpvlan(env *Env) error {
	mode := netlink.IPVLAN_MODE_L2
	if env.Option("ipvlan_mode", "l2") == "l3" {
		mode = netlink.IPVLAN_MODE_L3
	}
	return buildSubInterfaces(env, func(name string, parent int) netlink.Link {
		return &netlink.IPVlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: parent}, Mode: mode}
	}, "ipvl-shim")
}

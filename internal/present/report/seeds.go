package report

import (
	"slices"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
)

// The seeds' published numbers (the five seed articles, docs/seeds.md),
// keyed to vnetlab's cells. Absolute numbers differ by machine,
// so each table is compared as ratios to its own first row (the seed's
// baseline), against our ratio between the same two cells.

// SeedTable is one experiment of one seed.
type SeedTable struct {
	Seed  modes.Seed // the article (docs/seeds.md)
	Title string
	Test  string // vnetlab test
	Unit  string
	Setup string // how the seed measured: why its absolute numbers differ from ours
	Rows  []SeedRow
}

// SeedRow is one published number and the vnetlab cell that reproduces it.
// Rows[0] of a table is its baseline.
type SeedRow struct {
	What     string // the seed's case, in its words
	Value    float64
	Mode     string   // vnetlab mode label; "" = no vnetlab path measures this case
	StandIn  []string // modes accepted in Mode's place when Mode is not in the run (said in the report)
	Path     string   // pod, service, published, published-local, published-hairpin
	Provider string   // service provider for path service (iptables, nftables, ebpf)
	Nodes    int      // 2 = across two nodes (cells with mode option nodes=2); 0 or 1 = same host
	Note     string
}

// Article names the table's seed article by number and title.
func (t SeedTable) Article() string { return "seed " + t.Seed.Number + ", “" + t.Seed.Title + "”" }

// SeedTables is every published number vnetlab can put beside its own.
var SeedTables = []SeedTable{
	{
		Seed: modes.SeedInterfaces, Test: "tcp_stream", Unit: "Gbit/s",
		Title: "Linux virtual interfaces: loopback, veth, docker0, published ports (iperf3, same host)",
		Setup: "iperf3, one stream, 10 s, once each, on the author's laptop with Docker",
		Rows: []SeedRow{
			{What: "loopback (iperf3 -c 127.0.0.1)", Value: 49.2, Mode: "host", Path: "pod"},
			{What: "host to its own LAN IP", Value: 50.3, Note: "vnetlab's host mode dials 127.0.0.1 only"},
			{What: "container to host IP", Value: 49.8, Note: "no pod-to-node path in vnetlab yet"},
			{What: "container to container by container IP (veth, docker0, veth)", Value: 45.8, Mode: "docker-nat", Path: "pod"},
			{What: "host to container IP", Value: 54.3, Note: "no node-to-pod path in vnetlab yet"},
			{What: "host to 127.0.0.1:published port", Value: 34.9, Mode: "docker-nat", Path: "published-local",
				Note: "Docker's default userland-proxy probably served the seed's port (docker-proxy); vnetlab uses iptables DNAT + route_localnet (userland-proxy=false)"},
			{What: "host to host IP:published port", Value: 47.8, Note: "no node-to-own-IP:published-port path in vnetlab yet"},
		},
	},
	{
		Seed: modes.SeedLatency, Test: "tcp_rr", Unit: "trans/s",
		Title: "Container latency: host vs veth container (netperf TCP_RR)",
		Setup: "netperf TCP_RR, 1-byte request/response, 10 s, mean of 3 runs, across a physical LAN to a netserver on a second machine",
		Rows: []SeedRow{
			{What: "host to remote netserver", Value: 2446, Mode: "host", Path: "pod"},
			{What: "veth container to remote netserver", Value: 2141, Mode: "veth-routed", Path: "pod",
				Note: "the seed's round trip includes a physical LAN, vnetlab's stays on one host, so the veth hop is a larger share of vnetlab's round trip: expect a lower ratio here"},
		},
	},
	{
		Seed: modes.SeedPodModes, Test: "tcp_stream", Unit: "Gbit/s",
		Title: "Same-host pod connection modes, podIP vs clusterIP (the seed's summary table)",
		Setup: "iperf3, one stream, 10 s, once each, pod-b to pod-a on one host; clusterIP = one iptables DNAT rule, or the author's tc eBPF DNAT",
		Rows: []SeedRow{
			{What: "veth, podIP", Value: 66, Mode: "veth-routed", Path: "pod"},
			{What: "veth, clusterIP", Value: 66, Mode: "veth-routed", Path: "service", Provider: "iptables"},
			{What: "bridge, podIP, bridge-nf-call-iptables=0", Value: 77, Mode: "bridge-nf-off", Path: "pod"},
			{What: "bridge, podIP, bridge-nf-call-iptables=1", Value: 65, Mode: "bridge", Path: "pod"},
			{What: "bridge, clusterIP", Value: 61, Mode: "bridge", Path: "service", Provider: "iptables"},
			{What: "macvlan, podIP", Value: 83, Mode: "macvlan", Path: "pod"},
			{What: "macvlan, clusterIP", Value: 62, Mode: "macvlan", Path: "service", Provider: "iptables"},
			{What: "ipvlan, podIP", Value: 83, Mode: "ipvlan", Path: "pod"},
			{What: "ipvlan, clusterIP", Value: 62, Mode: "ipvlan", Path: "service", Provider: "iptables"},
			{What: "ipvlan+eBPF, podIP", Value: 83, Mode: "ipvlan-ebpf", StandIn: []string{"macvlan-ebpf"}, Path: "pod"},
			{What: "ipvlan+eBPF, clusterIP", Value: 78, Mode: "ipvlan-ebpf", StandIn: []string{"macvlan-ebpf"}, Path: "service", Provider: "ebpf"},
			{What: "veth+eBPF, podIP", Value: 74, Mode: "veth-ebpf", Path: "pod"},
			{What: "veth+eBPF, clusterIP", Value: 74, Mode: "veth-ebpf", Path: "service", Provider: "ebpf"},
		},
	},
	{
		Seed: modes.SeedBridgeOVS, Test: "tcp_stream", Unit: "Gbit/s",
		Title: "Bridge vs Open vSwitch, same host, TCP",
		Setup: "iperf (v2) -P 3 -t 300, TCP, CentOS 7.3 on a Dell R730; VMs are qemu-kvm with virtio",
		Rows:  valued(ovsSameHost, 10.7, 10.7, 10.7, 5.57, 5.83),
	},
	{
		Seed: modes.SeedBridgeOVS, Test: "udp_stream", Unit: "Gbit/s",
		Title: "Bridge vs Open vSwitch, same host, UDP (received rate)",
		Setup: "iperf (v2) -u -b 10G -P 3 -t 300, server-side (received) rate",
		Rows:  valued(ovsSameHost, 4.93, 3.85, 3.91, 5.39, 5.18),
	},
	{
		Seed: modes.SeedBridgeOVS, Test: "tcp_stream", Unit: "Gbit/s",
		Title: "Bridge vs Open vSwitch across two hosts (10GbE), TCP",
		Setup: "iperf (v2) -P 3 -t 300 across a 10GbE switch; the seed's VXLAN rows are empty",
		Rows:  valued(ovsTwoHosts, 7.02, 6.24, 6.09, 6.28, 5.94, 5.50),
	},
	{
		Seed: modes.SeedBridgeOVS, Test: "udp_stream", Unit: "Gbit/s",
		Title: "Bridge vs Open vSwitch across two hosts (10GbE), UDP (received rate)",
		Setup: "iperf (v2) -u -b 10G -P 3 -t 300 across a 10GbE switch, server-side (received) rate",
		Rows:  valued(ovsTwoHosts[:4], 8.08, 6.88, 5.60, 7.04), // no VM rows
	},
	{
		Seed: modes.SeedDocker, Test: "tcp_stream", Unit: "Gbit/s",
		Title: "Docker bridge mode on one host: container IP vs published port",
		Setup: "iperf3, one stream, Docker 17.05 on CentOS 7.3",
		Rows: []SeedRow{
			{What: "container to container by container IP (internal)", Value: 21.0, Mode: "docker-nat", Path: "pod"},
			{What: "container to container by host IP:published port (external)", Value: 8.0, Mode: "docker-nat", Path: "published-hairpin"},
			{What: "host to container by host IP:published port", Value: 23.8, Mode: "docker-nat", Path: "published-local",
				Note: "the seed dialled the host's IP (probably through docker-proxy); vnetlab dials 127.0.0.1 through iptables DNAT"},
		},
	},
	{
		Seed: modes.SeedDocker, Test: "tcp_stream", Unit: "Gbit/s",
		Title: "Docker host vs bridge mode across a 10GbE link",
		Setup: "iperf3, one stream, across a 10GbE switch: every case ran at line rate",
		Rows: []SeedRow{
			{What: "physical to physical", Value: 9.40, Mode: "host", Path: "pod", Nodes: 2},
			{What: "other host to Docker host mode", Value: 9.40, Note: "Docker host mode is the host itself: the baseline's path"},
			{What: "other host to bridge mode by published port", Value: 9.40, Mode: "docker-nat", Path: "published", Nodes: 2,
				Note: "the seed's link capped every case at 9.4: compare with a shaped underlay"},
		},
	},
}

// The bridge vs Open vSwitch seed measured the same cases with TCP and with
// UDP: its tables give their values (valued) in these rows' order.
var (
	ovsSameHost = []SeedRow{
		{What: "bridge, ns to ns (veth)", Mode: "bridge", Path: "pod"},
		{What: "OVS, ns to ns (veth)", Mode: "ovs", Path: "pod"},
		{What: "OVS, ns to ns (internal ports)", Mode: "ovs-internal", Path: "pod"},
		{What: "bridge, kvm to kvm", Mode: "tap-offload", Path: "pod",
			Note: "stand-in for a VM: tap devices and vnetlab's userspace forwarder, not qemu/vhost"},
		{What: "OVS, kvm to kvm", Note: "no VM-behind-OVS mode in vnetlab"},
	}
	ovsTwoHosts = []SeedRow{
		{What: "em1 to em1 (physical baseline)", Mode: "host", Path: "pod", Nodes: 2},
		{What: "bridge, ns to ns (veth)", Mode: "bridge", Path: "pod", Nodes: 2},
		{What: "OVS, ns to ns (veth)", Mode: "ovs", Path: "pod", Nodes: 2},
		{What: "OVS, ns to ns (internal ports)", Mode: "ovs-internal", Path: "pod", Nodes: 2},
		{What: "bridge, kvm to kvm", Note: "no cross-host VM mode in vnetlab"},
		{What: "OVS, kvm to kvm", Note: "no cross-host VM mode in vnetlab"},
	}
)

// valued is rows, each given its value in order: a value for every row.
func valued(rows []SeedRow, values ...float64) []SeedRow {
	if len(values) != len(rows) {
		panic("report: a seed table's values and rows differ in number")
	}
	out := slices.Clone(rows)
	for i, v := range values {
		out[i].Value = v
	}
	return out
}

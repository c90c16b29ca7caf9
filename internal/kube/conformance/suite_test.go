package conformance

import (
	"regexp"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

func TestResolveDefaults(t *testing.T) {
	s, err := Spec{}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	c := s.Cluster
	if s.Suite != Services || s.Focus != `\[sig-network\] Services` || s.Skip != DefaultSkip {
		t.Errorf("suite %q focus %q skip %q, want the Services suite", s.Suite, s.Focus, s.Skip)
	}
	if c.Name != DefaultCluster || c.Nodes != 3 || c.Zones != 3 || c.Proxy != "vnetlab-ebpf" || c.CNI != clusternet.CNIVnetlab || c.CNIMode != modes.VethEBPF {
		t.Errorf("cluster %+v, want 3 nodes in 3 zones, vnetlab-ebpf, vnetlab CNI veth-ebpf", c)
	}
	if two, err := (Spec{Cluster: cluster.Spec{Nodes: 2}}).Resolve(); err != nil || two.Cluster.Zones != 2 {
		t.Errorf("2 nodes: zones %d (%v), want 2 (one per node at most)", two.Cluster.Zones, err)
	}
	if s.Procs != 3 || s.FlakeAttempts != 1 || s.Timeout != DefaultTimeout {
		t.Errorf("procs %d, flake attempts %d, timeout %s", s.Procs, s.FlakeAttempts, s.Timeout)
	}
	if s.ReportDir != "conformance/services-vnetlab-ebpf-vnetlab-veth-ebpf" {
		t.Errorf("report dir %s", s.ReportDir)
	}
}

func TestResolveCNIFollowsProxy(t *testing.T) {
	for _, tc := range []struct {
		in             cluster.Spec
		cni, cniMode   string
		reportDirShows string
	}{
		{cluster.Spec{Proxy: "iptables"}, clusternet.CNIBridge, "", "services-iptables-bridge"},
		{cluster.Spec{Proxy: "vnetlab-sock"}, clusternet.CNIVnetlab, modes.VethEBPF, "services-vnetlab-sock-vnetlab-veth-ebpf"},
		{cluster.Spec{Proxy: "iptables", CNIMode: modes.VethRouted}, clusternet.CNIVnetlab, modes.VethRouted, "services-iptables-vnetlab-veth-routed"},
		{cluster.Spec{Proxy: "vnetlab-ebpf", SocketLB: true, CNI: clusternet.CNIBridge}, clusternet.CNIBridge, "", "services-vnetlab-ebpf-socketlb-bridge"},
	} {
		s, err := Spec{Cluster: tc.in}.Resolve()
		if err != nil {
			t.Errorf("%+v: %v", tc.in, err)
			continue
		}
		if s.Cluster.CNI != tc.cni || s.Cluster.CNIMode != tc.cniMode || s.ReportDir != "conformance/"+tc.reportDirShows {
			t.Errorf("%+v: CNI %s %s, report dir %s; want %s %s, %s", tc.in, s.Cluster.CNI, s.Cluster.CNIMode, s.ReportDir, tc.cni, tc.cniMode, tc.reportDirShows)
		}
	}
}

// On a cluster with IPv6 the default skip keeps IPv6 specs; the dual suite
// brings its family and its own skip.
func TestResolveFamily(t *testing.T) {
	for _, tc := range []struct {
		spec                 Spec
		fam                  family.Family
		skip, reportDirShows string
	}{
		{Spec{Cluster: cluster.Spec{Proxy: "iptables"}}, family.IPv4, DefaultSkip, "services-iptables-bridge"},
		{Spec{Cluster: cluster.Spec{Proxy: "iptables", Family: family.Dual}}, family.Dual, DefaultSkipIPv6, "services-iptables-bridge-dual"},
		{Spec{Suite: Conntrack, Cluster: cluster.Spec{Proxy: "nftables", Family: family.IPv6}}, family.IPv6, DefaultSkipIPv6, "conntrack-nftables-bridge-ipv6"},
		{Spec{Suite: Dual, Cluster: cluster.Spec{Proxy: "iptables", CNIMode: modes.VethRouted}}, family.Dual, DualSkip, "dual-iptables-vnetlab-veth-routed-dual"},
		{Spec{Suite: Dual, Skip: `Slow`, Cluster: cluster.Spec{Proxy: "iptables", Family: "DUAL"}}, family.Dual, `Slow`, "dual-iptables-bridge-dual"},
	} {
		s, err := tc.spec.Resolve()
		if err != nil {
			t.Errorf("%+v: %v", tc.spec, err)
			continue
		}
		if s.Cluster.Family != tc.fam || s.Skip != tc.skip || s.ReportDir != "conformance/"+tc.reportDirShows {
			t.Errorf("%+v: family %s, skip %q, report dir %s; want %s, %q, %s", tc.spec, s.Cluster.Family, s.Skip, s.ReportDir, tc.fam, tc.skip, tc.reportDirShows)
		}
	}
	if strings.Contains(DefaultSkipIPv6, "IPv6") || DefaultSkipIPv6 != strings.Replace(DefaultSkip, "IPv6|", "", 1) {
		t.Errorf("DefaultSkipIPv6 %q is not DefaultSkip %q without IPv6", DefaultSkipIPv6, DefaultSkip)
	}
	// Only the IPv6DualStack feature passes the dual skip.
	re := regexp.MustCompile(DualSkip)
	for _, name := range []string{"[Feature:IPv6DualStack] should be able to reach pod on ipv4 and ipv6 ip",
		"Networking Granular Checks: Services should function for node-Service: udp"} {
		if re.MatchString(name) {
			t.Errorf("the dual suite's skip %q skips %q", DualSkip, name)
		}
	}
	// vnetlab's proxies default to a mode that wires the cluster's families.
	if m, _ := modes.Get(defaultMode(family.Dual, false)); !m.IPv6 {
		t.Errorf("default mode %s on a dual-stack cluster wires IPv4 pods only", m.Name)
	}
	if defaultMode(family.IPv4, false) != modes.VethEBPF {
		t.Errorf("default mode on an IPv4 cluster %s, want %s", defaultMode(family.IPv4, false), modes.VethEBPF)
	}
	// Specs that need a NetworkPolicy enforcer get a mode vnetlab's serves.
	if m, _ := modes.Get(defaultMode(family.IPv4, true)); m.NodeFilterUnseen(nil) != "" {
		t.Errorf("default mode %s for the netpol suite: %s", m.Name, m.NodeFilterUnseen(nil))
	}
}

// Bad input gets one line naming the flag and the fix.
func TestResolveRefuses(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		says string
	}{
		{Spec{Suite: "sig-network"}, `--suite "sig-network": choose services, granular-services, conntrack, network, netpol, netpol-smoke, smoke, dual, dual-smoke`},
		{Spec{Suite: Netpol, Cluster: cluster.Spec{Proxy: "iptables"}}, `--suite netpol on a cluster whose NetworkPolicy enforcer is none: its specs need one: use --network-policy vnetlab|kube-router`},
		{Spec{Suite: Netpol, Cluster: cluster.Spec{NetworkPolicy: "calico"}}, `--network-policy "calico": NetworkPolicy enforcer: vnetlab (`},
		{Spec{Suite: Netpol, Cluster: cluster.Spec{CNIMode: "veth-ebpf", NetworkPolicy: "kube-router"}}, `--network-policy kube-router with --cni vnetlab --cni-mode veth-ebpf: its rules sit in the node's netfilter and veth-ebpf redirects pod-to-pod packets`},
		{Spec{Suite: Netpol, Cluster: cluster.Spec{Proxy: "iptables", CNIMode: "veth-ebpf", NetworkPolicy: "vnetlab"}}, `--network-policy vnetlab with --cni-mode veth-ebpf: its programs decide a pod's egress at the pod's eth0, before --proxy iptables translates`},
		{Spec{Focus: `[sig-network`}, `--focus "[sig-network" is not a regular expression`},
		{Spec{Skip: `a(`}, `--skip "a(" is not a regular expression`},
		{Spec{Cluster: cluster.Spec{Proxy: "ipvs"}}, `--proxy "ipvs"`},
		{Spec{Cluster: cluster.Spec{Proxy: "iptables", SocketLB: true}}, `socket LB is an option of --proxy vnetlab-ebpf`},
		{Spec{Cluster: cluster.Spec{Nodes: 9}}, `--nodes 9`},
		{Spec{Procs: -1}, `--procs -1`},
		{Spec{Suite: Dual, Cluster: cluster.Spec{Proxy: "iptables", Family: family.IPv4}}, `--suite dual with --ip-family ipv4: its specs need a dual cluster: use --ip-family dual`},
		{Spec{Suite: Dual, Cluster: cluster.Spec{Proxy: "iptables", Family: family.IPv6}}, `use --ip-family dual`},
		{Spec{Cluster: cluster.Spec{Proxy: "iptables", Family: "ipv5"}}, `--ip-family "ipv5": use ipv4, ipv6 or dual`},
	} {
		_, err := tc.spec.Resolve()
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: error %v, want one line with %q", tc.spec, err, tc.says)
		}
	}
}

// The smoke suite's focus selects each of its specs by upstream's full name
// (the dry run in the smoke test checks that e2e.test has them all).
func TestSmokeFocus(t *testing.T) {
	for _, specs := range [][]string{SmokeSpecs, DualSmokeSpecs, NetpolSmokeSpecs} {
		re := regexp.MustCompile(wholeNames(specs))
		for _, s := range specs {
			s = "Kubernetes e2e suite " + s
			if !re.MatchString(s) || !re.MatchString(s+" [LinuxOnly]") || !re.MatchString(s+" [LinuxOnly] [Conformance]") {
				t.Errorf("the smoke focus misses %q", s)
			}
		}
	}
	re := regexp.MustCompile(wholeNames(SmokeSpecs))
	for _, other := range []string{`[sig-network] Services should have session affinity timeout work for service with type clusterIP [LinuxOnly]`,
		`[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a NodePort service`,
		`[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a ClusterIP service with InternalTrafficPolicy set to Local`,
		`[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a ClusterIP service and client is hostNetwork`} {
		if re.MatchString("Kubernetes e2e suite " + other) {
			t.Errorf("the smoke focus selects %q", other)
		}
	}
}

// The network suite: [sig-network], skipping exactly NetworkSkips' groups,
// each with its reason; it keeps the DNS, Slow and Traffic Distribution
// specs DefaultSkip leaves out, and skips the groups' specs.
func TestNetworkSuite(t *testing.T) {
	s, err := Spec{Suite: Network}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	skip := regexp.MustCompile(s.Skip)
	for _, g := range NetworkSkips {
		if g.Why == "" || !strings.Contains(s.Skip, g.Pattern) {
			t.Errorf("group %q: reason %q, in the skip %v", g.Pattern, g.Why, strings.Contains(s.Skip, g.Pattern))
		}
	}
	for name, runs := range map[string]bool{
		`[sig-network] DNS should provide DNS for services [Conformance]`:                                                                                                                         true,
		`[sig-network] Networking should check kube-proxy urls`:                                                                                                                                   true,
		`[sig-network] Traffic Distribution should route traffic to an endpoint in the same zone when using PreferSameZone`:                                                                       true,
		`[sig-network] Networking Granular Checks: Services should update nodePort: http [Slow]`:                                                                                                  true,
		`[sig-network] Services should work after restarting apiserver [Disruptive]`:                                                                                                              false,
		`[sig-network] Netpol NetworkPolicy between server and client should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector [Feature:NetworkPolicy]`: false,
		`[sig-network] Networking should provide Internet connection for containers [Feature:Networking-IPv4]`:                                                                                    false,
		`[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]`:                                                                  false,
		`[sig-network] [Feature:IPv6DualStack] should create service with ipv6 cluster ip`:                                                                                                        false,
		`[sig-network] Services should allow creating a basic SCTP service with pod and endpoints [LinuxOnly] [Serial]`:                                                                           false,
	} {
		if got := !skip.MatchString(name); got != runs {
			t.Errorf("%q: runs %v, want %v", name, got, runs)
		}
	}
}

package conformance

import (
	"regexp"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/network"
	"github.com/vnetlab/vnetlab/internal/modes"
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
	if c.Name != DefaultCluster || c.Nodes != 3 || c.Proxy != "vnetlab-ebpf" || c.CNI != network.CNIVnetlab || c.CNIMode != modes.VethEBPF {
		t.Errorf("cluster %+v, want 3 nodes, vnetlab-ebpf, vnetlab CNI veth-ebpf", c)
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
		{cluster.Spec{Proxy: "iptables"}, network.CNIBridge, "", "services-iptables-bridge"},
		{cluster.Spec{Proxy: "vnetlab-sock"}, network.CNIVnetlab, modes.VethEBPF, "services-vnetlab-sock-vnetlab-veth-ebpf"},
		{cluster.Spec{Proxy: "iptables", CNIMode: modes.VethRouted}, network.CNIVnetlab, modes.VethRouted, "services-iptables-vnetlab-veth-routed"},
		{cluster.Spec{Proxy: "vnetlab-ebpf", SocketLB: true, CNI: network.CNIBridge}, network.CNIBridge, "", "services-vnetlab-ebpf-socketlb-bridge"},
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

// Bad input gets one line naming the flag and the fix.
func TestResolveRefuses(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		says string
	}{
		{Spec{Suite: "network"}, `--suite "network": choose services, granular-services, conntrack, smoke`},
		{Spec{Focus: `[sig-network`}, `--focus "[sig-network" is not a regular expression`},
		{Spec{Skip: `a(`}, `--skip "a(" is not a regular expression`},
		{Spec{Cluster: cluster.Spec{Proxy: "ipvs"}}, `--proxy "ipvs"`},
		{Spec{Cluster: cluster.Spec{Proxy: "iptables", SocketLB: true}}, `socket LB is an option of --proxy vnetlab-ebpf`},
		{Spec{Cluster: cluster.Spec{Nodes: 9}}, `--nodes 9`},
		{Spec{Procs: -1}, `--procs -1`},
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
	re := regexp.MustCompile(smokeFocus())
	for _, s := range SmokeSpecs {
		s = "Kubernetes e2e suite " + s
		if !re.MatchString(s) || !re.MatchString(s+" [LinuxOnly]") || !re.MatchString(s+" [LinuxOnly] [Conformance]") {
			t.Errorf("the smoke focus misses %q", s)
		}
	}
	for _, other := range []string{`[sig-network] Services should have session affinity timeout work for service with type clusterIP [LinuxOnly]`,
		`[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a NodePort service`,
		`[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a ClusterIP service with InternalTrafficPolicy set to Local`,
		`[sig-network] Conntrack should be able to preserve UDP traffic when server pod cycles for a ClusterIP service and client is hostNetwork`} {
		if re.MatchString("Kubernetes e2e suite " + other) {
			t.Errorf("the smoke focus selects %q", other)
		}
	}
}

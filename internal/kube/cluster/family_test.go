package cluster

import (
	"net"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// --ip-family with what cannot carry it is refused with one line naming
// the fix; what can is accepted.
func TestSpecValidateFamily(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Family: "ipv5"}, `--ip-family "ipv5"`},
		{Spec{Family: family.IPv6, CNI: clusternet.CNIVnetlab}, "use --ip-family dual, or --cni bridge"},
		{Spec{Family: family.Dual, CNI: clusternet.CNIFlannel}, "flannel IPv4-only so far: use --ip-family ipv4"},
	} {
		c.spec.Name, c.spec.Nodes = "k", 2
		if c.spec.Proxy == "" {
			c.spec.Proxy = clusternet.IPTables
		}
		err := c.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line containing %q", c.spec, err, c.want)
		}
	}
	for _, s := range []Spec{
		{Family: family.Dual, Proxy: clusternet.NFTables},
		{Family: family.IPv6, Proxy: clusternet.IPTables},
		{Family: family.Dual, Proxy: clusternet.IPTables, CNI: clusternet.CNIVnetlab, CNIMode: modes.Bridge},
		{Family: family.Dual, Proxy: clusternet.IPTables, CNI: clusternet.CNIVnetlab},
		{Family: family.Dual, Proxy: clusternet.VnetlabEBPF, CNI: clusternet.CNIVnetlab},
		{Family: family.IPv6, Proxy: clusternet.VnetlabEBPF},
		{Family: family.Dual, Proxy: clusternet.VnetlabSock},
		{Family: family.Dual, Proxy: clusternet.VnetlabEBPF, SocketLB: true},
	} {
		s.Name, s.Nodes = "k", 2
		if err := s.Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
}

// The address plan of each family: lists with the primary family first,
// node i's ranges inside the cluster's, the API server's and DNS's
// addresses of the primary family, and the CNI's ranges and routes.
func TestAddrPlan(t *testing.T) {
	dual, v6, v4 := addrPlan{family.Dual}, addrPlan{family.IPv6}, addrPlan{}
	if got := dual.serviceCIDRs(); got != "10.96.0.0/12,fd00:10:96::/112" {
		t.Errorf("dual service ranges %q", got)
	}
	if got := dual.clusterCIDRs(); got != "10.244.0.0/16,fd00:10:244::/56" {
		t.Errorf("dual cluster ranges %q", got)
	}
	if got := join(dual.nodeIPs(2)); got != "10.250.0.12,fd00:10:250::c" {
		t.Errorf("dual node 2's IPs %q", got)
	}
	p := dual.podCIDRs(3)
	if len(p) != 2 || p[0].String() != "10.244.3.0/24" || p[1].String() != "fd00:10:244:3::/64" || !clusterCIDR6.Contains(p[1].IP) {
		t.Errorf("dual node 3's pod ranges %v", p)
	}
	if got := cniRanges(p) + " " + cniDefaultRoutes(p); got != `[[{"subnet":"10.244.3.0/24"}],[{"subnet":"fd00:10:244:3::/64"}]] [{"dst":"0.0.0.0/0"},{"dst":"::/0"}]` {
		t.Errorf("dual CNI ranges and routes %s", got)
	}
	for _, c := range []struct {
		p                 addrPlan
		api, dns, kubeSvc string
		services          string
	}{
		{v4, "10.250.0.1", "10.96.0.10", "10.96.0.1", "10.96.0.0/12"},
		{dual, "10.250.0.1", "10.96.0.10", "10.96.0.1", "10.96.0.0/12,fd00:10:96::/112"},
		{v6, "fd00:10:250::1", "fd00:10:96::a", "fd00:10:96::1", "fd00:10:96::/112"},
	} {
		got := []string{c.p.apiAddress().String(), c.p.dnsIP().String(), c.p.kubernetesIP().String(), c.p.serviceCIDRs()}
		want := []string{c.api, c.dns, c.kubeSvc, c.services}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: API, DNS, kubernetes Service, Service ranges %v, want %v", c.p.fam.Or(), got, want)
		}
	}
	if RecordType(net.ParseIP("fd00::1")).String() != "TypeAAAA" || RecordType(net.ParseIP("10.0.0.1")).String() != "TypeA" {
		t.Error("RecordType")
	}
}

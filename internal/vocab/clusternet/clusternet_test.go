package clusternet

import (
	"strings"
	"testing"
)

// The texts written into results files and cluster states read back as the
// network that wrote them.
func TestTextsReadBack(t *testing.T) {
	for _, n := range []Network{
		{CNI: CNIBridge, Proxy: IPTables},
		{CNI: CNIVnetlab, CNIMode: "veth-routed", Proxy: NFTables},
		{CNI: CNIVnetlab, CNIMode: "veth-ebpf", Proxy: VnetlabEBPF, SocketLB: true},
		{CNI: CNIFlannel, CNIMode: FlannelVXLAN, Proxy: IPTables},
		{CNI: CNIFlannel, CNIMode: FlannelHostGW, Proxy: NFTables},
		{CNI: CNICilium, CNIMode: CiliumNative, Proxy: IPTables},
		{CNI: "calico", Proxy: "ipvs"},
	} {
		if got := FromText(n.CNIText(), n.ProxyText()); got != n {
			t.Errorf("%+v: texts %q, %q read back as %+v", n, n.CNIText(), n.ProxyText(), got)
		}
	}
	if got := FromText("calico+cilium", "unknown"); got.CNI != "calico" {
		t.Errorf("two detected CNIs: plugin %q, want the first", got.CNI)
	}
}

func TestProxies(t *testing.T) {
	for _, name := range ProxyNames() {
		p, err := GetProxy(name)
		if err != nil || p.Name != name || p.LabProvider == "" || p.Summary == "" {
			t.Errorf("%s: %+v, %v", name, p, err)
		}
		if !strings.Contains(ProxyHelp(), name) {
			t.Errorf("--proxy's help omits %s", name)
		}
	}
	if _, err := GetProxy("ipvs"); err == nil || !strings.Contains(err.Error(), VnetlabSock) {
		t.Errorf("ipvs: %v, want the known proxies named", err)
	}
	if !IsVnetlab(VnetlabSock) || IsVnetlab(NFTables) {
		t.Error("IsVnetlab")
	}
}

package cluster

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

func TestProxyChoice(t *testing.T) {
	for _, p := range clusternet.ProxyNames() {
		if pr, _ := clusternet.GetProxy(p); !pr.Serves(clusternet.CNIBridge) {
			continue
		}
		if err := (Spec{Name: "k", Nodes: 2, Proxy: p}).Validate(); err != nil {
			t.Errorf("--proxy %s: %v", p, err)
		}
	}
	err := (Spec{Name: "k", Nodes: 2, Proxy: "ipvs"}).Validate()
	if err == nil || !strings.Contains(err.Error(), "vnetlab-ebpf") {
		t.Errorf("--proxy ipvs: %v, want a refusal naming the choices", err)
	}
	if !clusternet.IsVnetlab("vnetlab-ebpf") || !clusternet.IsVnetlab("vnetlab-sock") || clusternet.IsVnetlab("iptables") {
		t.Error("network.IsVnetlab")
	}
	if err := (Spec{Name: "k", Nodes: 2, Proxy: "iptables", SocketLB: true}).Validate(); err == nil || !strings.Contains(err.Error(), "--proxy vnetlab-ebpf") {
		t.Errorf("--socket-lb with iptables: %v", err)
	}
	// '_' keeps a node's pins apart from any lab's (lab names have none).
	if got := ProxyPlane("k", NodeName("k", 2)); got != "k_node2" {
		t.Errorf("ProxyPlane = %q, want k_node2", got)
	}
}

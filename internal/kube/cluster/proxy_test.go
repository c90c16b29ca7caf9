package cluster

import (
	"strings"
	"testing"
)

func TestProxyChoice(t *testing.T) {
	for _, p := range []string{"iptables", "nftables", "vnetlab-ebpf", "vnetlab-sock"} {
		if err := (Spec{Name: "k", Nodes: 2, Proxy: p}).Validate(); err != nil {
			t.Errorf("--proxy %s: %v", p, err)
		}
	}
	err := (Spec{Name: "k", Nodes: 2, Proxy: "ipvs"}).Validate()
	if err == nil || !strings.Contains(err.Error(), "vnetlab-ebpf") {
		t.Errorf("--proxy ipvs: %v, want a refusal naming the choices", err)
	}
	if !IsVnetlabProxy("vnetlab-ebpf") || !IsVnetlabProxy("vnetlab-sock") || IsVnetlabProxy("iptables") {
		t.Error("IsVnetlabProxy")
	}
	// '_' keeps a node's pins apart from any lab's (lab names have none).
	if got := ProxyPlane("k", NodeName("k", 2)); got != "k_node2" {
		t.Errorf("ProxyPlane = %q, want k_node2", got)
	}
}

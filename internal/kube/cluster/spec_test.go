package cluster

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// A node's name (NAME-nodeN) is an interface name: a cluster name that
// makes it longer than 15 characters is refused with one line saying the
// longest that fits (kube up failed half-way with "uplink: numerical result
// out of range"); the longest that fits passes.
func TestSpecValidateNameFitsNodeNames(t *testing.T) {
	err := (Spec{Name: "fl-host-gw", Nodes: 2, Proxy: "iptables"}).Validate()
	if err == nil || !strings.Contains(err.Error(), "fl-host-gw-node2") || !strings.Contains(err.Error(), "at most 9 characters") {
		t.Errorf("10-character name, 2 nodes: %v", err)
	}
	if err := (Spec{Name: "fl-host-g", Nodes: 2, Proxy: "iptables"}).Validate(); err != nil {
		t.Errorf("9-character name, 2 nodes: %v", err)
	}
	if err := (Spec{Name: "fl-host-g", Nodes: maxNodes, Proxy: "iptables"}).Validate(); err != nil {
		t.Errorf("9-character name, %d nodes: %v", maxNodes, err)
	}
}

// --zones: node i in zone-((i-1) mod N + 1) of region local, labelled by
// its kubelet; 0 labels nothing; more zones than nodes, or fewer than 0,
// is refused naming --zones.
func TestZones(t *testing.T) {
	s := Spec{Name: "k", Nodes: 4, Proxy: "iptables", Zones: 3}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []string{"zone-1", "zone-2", "zone-3", "zone-1"}
	for i := 1; i <= 4; i++ {
		if got := s.nodeLabels(i); got != "topology.kubernetes.io/zone="+want[i-1]+",topology.kubernetes.io/region=local" {
			t.Errorf("node %d: --node-labels %q", i, got)
		}
	}
	if s.networkFacts()[FactZones] != "3" {
		t.Errorf("facts %v: no zones=3", s.networkFacts())
	}
	s.Zones = 0
	if got := s.nodeLabels(1); got != "" {
		t.Errorf("no zones: --node-labels %q", got)
	}
	if _, ok := s.networkFacts()[FactZones]; ok {
		t.Error("no zones: a zones fact")
	}
	for _, z := range []int{-1, 5} {
		s.Zones = z
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "zones") {
			t.Errorf("--zones %d on 4 nodes: %v, want refused naming zones", z, err)
		}
	}
}

// --network-policy: vnetlab's by default with vnetlab's CNI in a mode whose
// packets cross the node's netfilter or, with vnetlab's eBPF proxy, whose
// pods carry its programs (veth-ebpf), none with another CNI unless asked; an enforcer is refused, naming why, with a CNI mode whose
// packets it cannot see; the facts record it and a state read back has it
// (a cluster built before the fact enforces none).
func TestNetworkPolicy(t *testing.T) {
	for _, tc := range []struct {
		spec      Spec
		want, lab string // the enforcer, its lab provider
	}{
		{Spec{CNI: "vnetlab"}, "vnetlab", "nftables"},
		{Spec{CNI: "vnetlab", CNIMode: "bridge"}, "vnetlab", "nftables"},
		{Spec{CNI: "vnetlab", CNIMode: "veth-ebpf"}, "none", ""},
		{Spec{CNI: "vnetlab", CNIMode: "veth-ebpf", Proxy: "vnetlab-ebpf"}, "vnetlab", "ebpf"},
		{Spec{CNI: "vnetlab", CNIMode: "veth-ebpf", Proxy: "vnetlab-ebpf", SocketLB: true, NetworkPolicy: "vnetlab"}, "vnetlab", "ebpf"},
		{Spec{}, "none", ""},
		{Spec{CNI: "flannel"}, "none", ""},
		{Spec{CNI: "bridge", NetworkPolicy: "kube-router"}, "kube-router", "iptables"},
		{Spec{CNI: "bridge", NetworkPolicy: "vnetlab"}, "vnetlab", "nftables"},
		{Spec{CNI: "vnetlab", NetworkPolicy: "none"}, "none", ""},
	} {
		tc.spec.Name, tc.spec.Nodes = "k", 2
		if tc.spec.Proxy == "" {
			tc.spec.Proxy = "iptables"
		}
		if err := tc.spec.Validate(); err != nil {
			t.Errorf("%+v: %v", tc.spec, err)
			continue
		}
		if got := tc.spec.Network().Policy; got != tc.want {
			t.Errorf("%+v: enforcer %s, want %s", tc.spec, got, tc.want)
		}
		if got := tc.spec.networkFacts()[FactPolicy]; got != tc.want {
			t.Errorf("%+v: fact %s, want %s", tc.spec, got, tc.want)
		}
		if got := PolicyLabProvider(&lab.State{Facts: tc.spec.networkFacts()}); got != tc.lab {
			t.Errorf("%+v: lab policy provider %q, want %q", tc.spec, got, tc.lab)
		}
	}
	for _, tc := range []struct {
		spec Spec
		says string
	}{
		{Spec{CNI: "vnetlab", CNIMode: "veth-ebpf", NetworkPolicy: "vnetlab"}, "--network-policy vnetlab with --cni-mode veth-ebpf: its programs decide a pod's egress at the pod's eth0, before --proxy iptables translates"},
		{Spec{CNI: "vnetlab", CNIMode: "veth-ebpf", NetworkPolicy: "kube-router"}, "--network-policy kube-router with --cni vnetlab --cni-mode veth-ebpf"},
		{Spec{NetworkPolicy: "calico"}, `--network-policy "calico": NetworkPolicy enforcer: vnetlab (`},
	} {
		tc.spec.Name, tc.spec.Nodes = "k", 2
		if tc.spec.Proxy == "" {
			tc.spec.Proxy = "iptables"
		}
		err := tc.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line with %q", tc.spec, err, tc.says)
		}
	}
	if got := Network(&lab.State{Facts: map[string]string{FactCNIPlugin: "vnetlab", FactProxy: "iptables"}}).Policy; got != "none" {
		t.Errorf("a cluster built before the network_policy fact: enforcer %q, want none", got)
	}
}

package cluster

import (
	"strings"
	"testing"
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

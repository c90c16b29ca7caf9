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

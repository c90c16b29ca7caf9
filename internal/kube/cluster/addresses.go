package cluster

// The address plan inside a cluster, and the names its parts get.

import (
	"net"
	"time"
)

// Addresses inside a cluster (each cluster has namespaces of its own, so
// clusters can share them).
var (
	nodeNet     = mustCIDR("10.250.0.0/24") // the control plane's bridge and the nodes' eth0
	clusterCIDR = mustCIDR("10.244.0.0/16") // node i's pods: 10.244.i.0/24
	serviceCIDR = "10.96.0.0/16"
	apiIP       = net.IPv4(10, 250, 0, 1)
)

const (
	apiPort   = 6443
	bridge    = "br0"
	uplink    = "eth0"
	cpWho     = "cp"
	maxNodes  = 8
	waitReady = 3 * time.Minute
)

func mustCIDR(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }

func podCIDR(i int) *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, 244, byte(i), 0).To4(), Mask: net.CIDRMask(24, 32)}
}

package cluster

// The address plan inside a cluster, and the names its parts get.

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Addresses inside a cluster (each cluster has namespaces of its own, so
// clusters can share them). The IPv6 side (--ip-family ipv6 or dual) uses
// kind's dual-stack ranges.
var (
	nodeNet     = mustCIDR("10.250.0.0/24") // the control plane's bridge and the nodes' eth0
	clusterCIDR = mustCIDR("10.244.0.0/16") // node i's pods: 10.244.i.0/24
	serviceCIDR = "10.96.0.0/12"            // kubeadm's: 1,048,574 Service addresses (a /16's 65,534 hold no 100k Services)
	apiIP       = net.IPv4(10, 250, 0, 1)

	nodeNet6     = mustCIDR("fd00:10:250::/64") // node i's eth0: fd00:10:250::(10+i)
	clusterCIDR6 = mustCIDR("fd00:10:244::/56") // node i's pods: fd00:10:244:i::/64
	serviceCIDR6 = "fd00:10:96::/112"           // the API server allows at most 2^20 Service addresses
	apiIP6       = net.ParseIP("fd00:10:250::1")
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

// podCIDR6 is node i's IPv6 pod range, a /64 of clusterCIDR6.
func podCIDR6(i int) *net.IPNet {
	ip := make(net.IP, net.IPv6len)
	copy(ip, clusterCIDR6.IP)
	ip[7] = byte(i)
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(64, 128)}
}

// addrPlan is the cluster's addressing for its family: every list has the
// primary family (IPv4 in a dual-stack cluster, as kind's) first, as the
// API server, kubelet and kube-proxy want their dual-stack flags.
type addrPlan struct{ fam family.Family }

// pick is v4 and/or v6, as the family has them, the primary first.
func pick[T any](f family.Family, v4, v6 T) []T {
	var out []T
	if f.HasIPv4() {
		out = append(out, v4)
	}
	if f.HasIPv6() {
		out = append(out, v6)
	}
	return out
}

func join[T fmt.Stringer](xs []T) string {
	var s []string
	for _, x := range xs {
		s = append(s, x.String())
	}
	return strings.Join(s, ",")
}

// serviceCIDRs is --service-cluster-ip-range.
func (p addrPlan) serviceCIDRs() string {
	return strings.Join(pick(p.fam, serviceCIDR, serviceCIDR6), ",")
}

// clusterCIDRs is kube-proxy's clusterCIDR: every node's pods.
func (p addrPlan) clusterCIDRs() string { return join(pick(p.fam, clusterCIDR, clusterCIDR6)) }

// podCIDRs are node i's pod ranges (the CNI's IPAM ranges).
func (p addrPlan) podCIDRs(i int) []*net.IPNet { return pick(p.fam, podCIDR(i), podCIDR6(i)) }

// nodeIPs are node i's InternalIPs (kubelet --node-ip): its eth0's.
func (p addrPlan) nodeIPs(i int) []net.IP {
	return pick(p.fam, modes.NthIP(nodeNet, 10+i), modes.NthIP(nodeNet6, 10+i))
}

// kubernetesIP is the `kubernetes` Service's ClusterIP: the first address
// of the primary Service range.
func (p addrPlan) kubernetesIP() net.IP { return p.serviceIP(1) }

// dnsIP is the kube-dns Service's fixed ClusterIP: the tenth of the primary
// range, by convention (kubelet's clusterDNS names it before the Service
// exists).
func (p addrPlan) dnsIP() net.IP { return p.serviceIP(10) }

func (p addrPlan) serviceIP(n int) net.IP {
	return modes.NthIP(mustCIDR(pick(p.fam, serviceCIDR, serviceCIDR6)[0]), n)
}

// apiAddress is the API server's advertised address: of the primary
// family, as the kubernetes Service's endpoint must be.
func (p addrPlan) apiAddress() net.IP { return pick(p.fam, apiIP, apiIP6)[0] }

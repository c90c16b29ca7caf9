// Package clusternet names what makes a cluster's network: the CNI plugin that
// wires its pods (with vnetlab's own, the mode it wires them with; with
// flannel, its backend) and the
// Service proxy (with vnetlab-ebpf, whether the socket LB is on), and the
// NetworkPolicy enforcer (policy.go). The
// cluster builder, vnetlab's proxy, scenario files, help texts and the
// comparison of a cluster's results with a lab's ask this package, never a
// name spelled again. It imports nothing of vnetlab's, so every layer can.
package clusternet

import (
	"fmt"
	"slices"
	"strings"
)

// The CNI plugins a local cluster's pods can be wired by (kube up --cni).
const (
	// CNIBridge is Debian's bridge + host-local plugins (the default).
	CNIBridge = "bridge"
	// CNIVnetlab is vnetlab's own plugin (internal/platform/cni), wiring pods with
	// one of its modes (Network.CNIMode).
	CNIVnetlab = "vnetlab"
	// CNIFlannel is flannel: flanneld (built from its Go module) on every
	// node, with one of its backends (Network.CNIMode), and the bridge +
	// host-local configuration flannel's CNI plugin generates.
	CNIFlannel = "flannel"
	// CNICilium is Cilium (built from its Go module): its agent on every
	// node as a node daemon, its operator beside the control plane, its
	// own CNI plugin; native routing between the nodes (Network.CNIMode).
	CNICilium = "cilium"
)

// CNIs lists --cni's values, the default first.
var CNIs = []string{CNIBridge, CNIVnetlab, CNIFlannel, CNICilium}

// flannel's backends a local cluster runs (kube up --flannel-backend): the
// data paths vnetlab's vxlan and host-gw lab modes claim to reproduce.
const (
	FlannelVXLAN  = "vxlan"
	FlannelHostGW = "host-gw"
)

// FlannelBackends lists --flannel-backend's values, the default first.
var FlannelBackends = []string{FlannelVXLAN, FlannelHostGW}

// CiliumNative is Cilium's routing mode a local cluster runs: pod packets
// routed between the nodes as they are, each node's route to the others'
// pods installed by the agent (auto-direct-node-routes), no tunnel.
const CiliumNative = "native"

// The Service proxies a local cluster's nodes can run (kube up --proxy).
const (
	IPTables    = "iptables"
	NFTables    = "nftables"
	VnetlabEBPF = "vnetlab-ebpf"
	VnetlabSock = "vnetlab-sock"
	// CiliumKPR is Cilium's kube-proxy replacement, its agent's own.
	CiliumKPR = "cilium"
)

// DefaultProxy is kube-proxy's default mode.
const DefaultProxy = IPTables

// Proxy is one Service proxy and what it can do; code asks these fields,
// never the name.
type Proxy struct {
	Name string
	// Summary is one line for --help.
	Summary string
	// Vnetlab: the nodes run `vnetlab kube-proxy` (internal/kube/proxy)
	// instead of kube-proxy in mode Name, and its socket programs sit on
	// the nodes' cgroups.
	Vnetlab bool
	// SocketLB: the proxy takes --socket-lb (its pods' connect() and
	// sendmsg() translated at the socket too).
	SocketLB bool
	// CNI: the proxy is this CNI's own (its agent serves the Services; no
	// proxy process of its own): it runs only with that CNI ("": any).
	CNI string
	// NodeCgroup: the node's own processes get ClusterIPs translated only
	// in the node's cgroup, where the proxy's socket programs are, not
	// everywhere in its namespace as with kube-proxy's netfilter rules.
	NodeCgroup bool
	// LabProvider is the lab Service provider (internal/platform/labservice's name)
	// with the same data path: `compare lab.json cluster.json` pairs a lab's
	// service cells of that provider with the cluster's Service cells.
	LabProvider string
}

// Proxies lists every proxy, kube-proxy's modes first.
var Proxies = []Proxy{
	{Name: IPTables, LabProvider: "iptables", Summary: "kube-proxy in mode iptables"},
	{Name: NFTables, LabProvider: "nftables", Summary: "kube-proxy in mode nftables"},
	{Name: VnetlabEBPF, Vnetlab: true, SocketLB: true, NodeCgroup: true, LabProvider: "ebpf",
		Summary: "vnetlab's own (vnetlab kube-proxy, no kube-proxy process): tc programs on the pods' veths"},
	{Name: VnetlabSock, Vnetlab: true, NodeCgroup: true, LabProvider: "ebpf-sock",
		Summary: "vnetlab's own: socket programs on the node's cgroup (no per-packet NAT)"},
	{Name: CiliumKPR, CNI: CNICilium, NodeCgroup: true, LabProvider: "ebpf-sock",
		Summary: "Cilium's kube-proxy replacement, with --cni cilium (its agent, no kube-proxy process): socket LB on the node's cgroup"},
}

// Serves says whether the proxy runs with CNI cni.
func (p Proxy) Serves(cni string) bool { return p.CNI == "" || p.CNI == cni }

// ProxyNames lists the proxies' names in Proxies' order.
func ProxyNames() []string {
	var n []string
	for _, p := range Proxies {
		n = append(n, p.Name)
	}
	return n
}

// VnetlabProxyNames lists vnetlab's own proxies' names in Proxies' order.
func VnetlabProxyNames() []string {
	var n []string
	for _, p := range Proxies {
		if p.Vnetlab {
			n = append(n, p.Name)
		}
	}
	return n
}

// GetProxy returns a proxy by name.
func GetProxy(name string) (Proxy, error) {
	i := slices.IndexFunc(Proxies, func(p Proxy) bool { return p.Name == name })
	if i < 0 {
		return Proxy{}, fmt.Errorf("unknown proxy %q (known: %s)", name, strings.Join(ProxyNames(), ", "))
	}
	return Proxies[i], nil
}

// IsVnetlab says whether proxy name runs vnetlab's own proxy.
func IsVnetlab(name string) bool {
	p, err := GetProxy(name)
	return err == nil && p.Vnetlab
}

// ProxyHelp is --proxy's help: every proxy with its summary.
func ProxyHelp() string {
	var parts []string
	for _, p := range Proxies {
		parts = append(parts, p.Name+" ("+p.Summary+")")
	}
	return "Service proxy: " + strings.Join(parts, "; ")
}

// Network is a cluster's network, as `kube up` built it or as a run on any
// cluster detected it: the structured facts the results record.
type Network struct {
	// CNI is the plugin: CNIBridge or CNIVnetlab for a local cluster, the
	// (first) detected one for another ("calico", "unknown").
	CNI string
	// CNIMode is the plugin's variant: the mode CNIVnetlab wires pods with,
	// CNIFlannel's backend, CNICilium's routing ("" for other plugins).
	CNIMode string
	// Proxy is the Service proxy (one of Proxies, or kube-proxy's detected
	// mode on another cluster, e.g. "ipvs").
	Proxy string
	// SocketLB: vnetlab-ebpf with its socket LB on.
	SocketLB bool
	// Policy is the NetworkPolicy enforcer (one of Enforcers; "" when
	// unknown: a cluster vnetlab did not build).
	Policy string
}

// CNIText is the CNI as people read it (the results' cni field, kube up's
// line): "bridge+host-local", "vnetlab veth-routed + host-local",
// "flannel vxlan + bridge+host-local", "cilium native".
func (n Network) CNIText() string {
	switch n.CNI {
	case CNIBridge:
		return "bridge+host-local"
	case CNIVnetlab:
		return "vnetlab " + n.CNIMode + " + host-local"
	case CNIFlannel:
		return "flannel " + n.CNIMode + " + bridge+host-local"
	case CNICilium:
		return "cilium " + n.CNIMode
	}
	return n.CNI
}

// ProxyText is the proxy as people read it: "vnetlab-ebpf + socket LB"
// with the socket LB on.
func (n Network) ProxyText() string {
	if n.SocketLB {
		return n.Proxy + " + socket LB"
	}
	return n.Proxy
}

// socketLBSuffix ends ProxyText with the socket LB on.
const socketLBSuffix = " + socket LB"

// FromText reads a network back from its texts (CNIText, ProxyText): for
// results files and cluster states written before the structured fields.
func FromText(cni, proxy string) Network {
	n := Network{Proxy: strings.TrimSuffix(proxy, socketLBSuffix), SocketLB: strings.HasSuffix(proxy, socketLBSuffix)}
	// The plugin is the first word before "+" ("bridge+host-local",
	// "calico+cilium": the first detected); vnetlab's names its mode next,
	// flannel its backend, cilium its routing.
	plugin, _, _ := strings.Cut(cni, "+")
	n.CNI = strings.TrimSpace(plugin)
	if f := strings.Fields(n.CNI); len(f) == 2 && (f[0] == CNIVnetlab || f[0] == CNIFlannel || f[0] == CNICilium) {
		n.CNI, n.CNIMode = f[0], f[1]
	}
	return n
}

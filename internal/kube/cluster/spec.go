package cluster

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Spec is what `kube up` builds.
type Spec struct {
	Name  string
	Nodes int
	Proxy string // one of clusternet.Proxies
	// CNI wires the pods: network.CNIBridge ("" too), network.CNIVnetlab
	// with CNIMode (cni.go) or network.CNIFlannel with FlannelBackend
	// (flannel.go).
	CNI, CNIMode string
	// FlannelBackend is flannel's backend, one of network.FlannelBackends
	// ("" is the first).
	FlannelBackend string
	// SocketLB (--socket-lb, with vnetlab-ebpf): the nodes' socket programs
	// translate the pods' connections too (proxy.Config.SocketLB).
	SocketLB bool
	// Family (--ip-family): the IP families of the cluster's Service and
	// pod ranges, node addresses and routes (ipv4 when unset; dual: IPv4
	// primary, as kind's).
	Family family.Family
	// Zones (--zones) labels the nodes with that many zones, round robin
	// (zones.go); 0: no zone labels.
	Zones int
	// NetworkPolicy (--network-policy) is the NetworkPolicy enforcer, one
	// of clusternet.Enforcers ("": vnetlab's with vnetlab's CNI in a mode
	// it serves, else none; policy.go).
	NetworkPolicy string
}

// Facts keys of a cluster's lab state.
const (
	FactKubeconfig = "kubeconfig"
	FactServer     = "server"
	FactVersion    = "version"
	FactProxy      = "proxy"
	FactImage      = "image"
	FactCNI        = "cni"            // clusternet.Network.CNIText(), for people
	FactCNIPlugin  = "cni_plugin"     // network.CNIBridge or network.CNIVnetlab
	FactCNIMode    = "cni_mode"       // with network.CNIVnetlab: its mode; with network.CNIFlannel: its backend
	FactSocketLB   = "socket_lb"      // "true" with --socket-lb
	FactFamily     = "ip_family"      // family.Family; clusters built before it are ipv4
	FactPolicy     = "network_policy" // clusternet.Enforcers' name; clusters built before it enforce none
	// FactProxySince: when `kube set-proxy` started the proxy the cluster
	// runs (RFC 3339, UTC); absent on a cluster whose proxy is kube up's.
	FactProxySince = "proxy_since"
	// FactSwitchingTo: the proxy a set-proxy that has not finished was
	// switching to (as its --proxy, with " --socket-lb"), while the
	// cluster's status is StatusSwitchingProxy.
	FactSwitchingTo = "proxy_switching_to"
)

// Family is the cluster's IP family as its facts say.
func Family(st *lab.State) family.Family { return family.Family(st.Facts[FactFamily]).Or() }

// Network is the cluster's network as its facts say (clusters built before
// the cni_plugin fact: read back from its text).
func Network(st *lab.State) clusternet.Network {
	f := st.Facts
	if f[FactCNIPlugin] == "" {
		n := clusternet.FromText(f[FactCNI], f[FactProxy])
		n.SocketLB, n.Policy = f[FactSocketLB] == "true", clusternet.PolicyNone
		return n
	}
	policy := f[FactPolicy]
	if policy == "" {
		policy = clusternet.PolicyNone
	}
	return clusternet.Network{CNI: f[FactCNIPlugin], CNIMode: f[FactCNIMode], Proxy: f[FactProxy], SocketLB: f[FactSocketLB] == "true", Policy: policy}
}

// Network is the network the spec builds (the default CNI and mode filled in).
func (s Spec) Network() clusternet.Network {
	n := clusternet.Network{CNI: s.CNI, Proxy: s.Proxy, SocketLB: s.SocketLB}
	if n.CNI == "" {
		n.CNI = clusternet.CNIBridge
	}
	switch n.CNI {
	case clusternet.CNIVnetlab:
		n.CNIMode = s.cniMode()
	case clusternet.CNIFlannel:
		n.CNIMode = s.flannelBackend()
	case clusternet.CNICilium:
		n.CNIMode = clusternet.CiliumNative
	}
	n.Policy = s.networkPolicy()
	return n
}

// networkFacts are the facts that record the spec's network.
func (s Spec) networkFacts() map[string]string {
	n := s.Network()
	f := map[string]string{FactProxy: n.Proxy, FactCNI: n.CNIText(), FactCNIPlugin: n.CNI, FactPolicy: n.Policy}
	if n.CNIMode != "" {
		f[FactCNIMode] = n.CNIMode
	}
	if n.SocketLB {
		f[FactSocketLB] = "true"
	}
	f[FactFamily] = string(s.Family.Or())
	if s.Zones > 0 {
		f[FactZones] = strconv.Itoa(s.Zones)
	}
	return f
}

// Validate says what is wrong with a spec and how to fix it.
func (s Spec) Validate() error {
	if err := lab.ValidName("cluster", s.Name); err != nil {
		return err
	}
	if s.Nodes < 1 || s.Nodes > maxNodes {
		return field.Errorf("nodes", "{nodes} %d: a local cluster has 1 to %d nodes", s.Nodes, maxNodes)
	}
	// A node's name is also its uplink's name in the control plane's
	// namespace (wire.go): an interface name.
	if last := NodeName(s.Name, s.Nodes); len(last) > lab.MaxNameLen {
		return fmt.Errorf("cluster name %q: its node names (%s) are interface names, at most %d characters: use a name of at most %d characters",
			s.Name, last, lab.MaxNameLen, lab.MaxNameLen-(len(last)-len(s.Name)))
	}
	if err := s.validateZones(); err != nil {
		return err
	}
	if err := s.validateCNI(); err != nil {
		return err
	}
	if err := s.validatePolicy(); err != nil {
		return err
	}
	p, err := clusternet.GetProxy(s.Proxy)
	if err != nil {
		return field.Errorf("proxy", "{proxy} %q: %s", s.Proxy, clusternet.ProxyHelp())
	}
	if cni := s.Network().CNI; !p.Serves(cni) {
		return field.Errorf("proxy", "{proxy} %s is %s's own: add {cni} %s (the cluster's CNI is %s)", p.Name, p.CNI, p.CNI, cni)
	}
	if s.SocketLB && !p.SocketLB {
		return field.Errorf("socket_lb", "{proxy} %s with {socket_lb}: socket LB is an option of {proxy} %s (vnetlab-sock translates every socket already; kube-proxy has none)", s.Proxy, clusternet.VnetlabEBPF)
	}
	return s.validateFamily()
}

// validateFamily checks --ip-family against the CNI, its mode and the
// kernel (every proxy serves both families).
func (s Spec) validateFamily() error {
	f, err := family.Parse(string(s.Family))
	if err != nil {
		return field.Errorf("ip_family", "{ip_family} %q: use ipv4, ipv6 or dual", s.Family)
	}
	if !f.HasIPv6() {
		return nil
	}
	if s.CNI == clusternet.CNIFlannel {
		// flannel can do dual-stack (EnableIPv6), but vnetlab reads only its
		// IPv4 subnet.env keys into the conflist so far.
		return field.Errorf("ip_family", "{cni} %s with {ip_family} %s: vnetlab runs flannel IPv4-only so far: use {ip_family} ipv4, or {cni} %s|%s", clusternet.CNIFlannel, f, clusternet.CNIBridge, clusternet.CNIVnetlab)
	}
	if s.CNI == clusternet.CNICilium {
		return field.Errorf("ip_family", "{cni} %s with {ip_family} %s: vnetlab runs Cilium IPv4-only so far: use {ip_family} ipv4", clusternet.CNICilium, f)
	}
	if s.CNI == clusternet.CNIVnetlab {
		if m, err := modes.Get(s.cniMode()); err == nil && !m.IPv6 {
			return field.Errorf("ip_family", "{cni_mode} %s with {ip_family} %s: the mode wires IPv4 pods only: use {cni_mode} %s", m.Name, f, strings.Join(CNIModes6(), "|"))
		}
		if !f.HasIPv4() {
			return field.Errorf("ip_family", "{cni} %s with {ip_family} %s: vnetlab's modes wire IPv4 or dual-stack pods, not IPv6-only ones: use {ip_family} dual, or {cni} %s", clusternet.CNIVnetlab, f, clusternet.CNIBridge)
		}
	}
	return kernel.Check(kernel.IPv6)
}

// InternalKubeconfig is the kubeconfig of cluster k's own processes: the
// API server at its address on the control-plane bridge, reachable from the
// control plane's namespace (State.Ext) and the nodes'.
func InternalKubeconfig(k string) string { return filepath.Join(lab.Dir(k), "kubeconfig-internal") }

// NodeName is the Kubernetes name of node i (1-based) of cluster k.
func NodeName(k string, i int) string { return fmt.Sprintf("%s-node%d", k, i) }

// CNIModes6 lists the modes vnetlab's CNI wires dual-stack pods with.
func CNIModes6() []string {
	return modes.NamesWhere(func(m modes.Mode) bool { return m.Attach != nil && m.IPv6 })
}

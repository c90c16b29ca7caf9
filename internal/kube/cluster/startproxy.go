package cluster

// Starting a node's Service proxy: kube-proxy in its mode, or `vnetlab
// kube-proxy` with its pin directory and where the CNI put the pods. The
// proxy itself (its informers and its sync into the maps) is
// internal/kube/proxy.

import (
	"path/filepath"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/platform/cni"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// PodBridge is the bridge the bridge CNI configuration (configs.go) puts pods on.
const PodBridge = "cni0"

// ProxyPlane is the pin directory (under /sys/fs/bpf/vnetlab) of a node's
// Service maps: the cluster's name, '_', the node's suffix ("k_node1").
// '_' is never in a lab name, so `vnetlab clean` keeps it while the
// cluster lives (internal/platform/lab's clean) and `kube down` removes it (journal).
func ProxyPlane(cluster, node string) string {
	return cluster + "_" + strings.TrimPrefix(node, cluster+"-")
}

func (s Spec) proxyProcess() string {
	if p, err := clusternet.GetProxy(s.Proxy); err == nil && p.CNI != "" {
		return "Services by " + p.CNI + "'s agent"
	}
	switch {
	case s.SocketLB:
		return "vnetlab kube-proxy (" + s.Proxy + ", socket LB)"
	case clusternet.IsVnetlab(s.Proxy):
		return "vnetlab kube-proxy (" + s.Proxy + ")"
	}
	return "kube-proxy"
}

// kube-proxy's configuration files in a node's directory: the one it
// runs with, and the one `kube-proxy --cleanup` reads when set-proxy
// removes its rules (cleanProxyState).
const (
	kubeProxyConfig        = "kube-proxy.yaml"
	kubeProxyCleanupConfig = "kube-proxy-cleanup.yaml"
)

// writeKubeProxyConfig writes node n's kube-proxy configuration file name
// for mode (with a vnetlab proxy, the file names it and nothing reads it).
func (b *builder) writeKubeProxyConfig(n node, name, mode string) error {
	return writeTemplate(filepath.Join(n.dir, name), kubeProxyTmpl, map[string]string{
		"Kubeconfig": InternalKubeconfig(b.spec.Name), "Node": n.name, "Proxy": mode, "ClusterCIDR": b.addrs.clusterCIDRs()})
}

// startProxy starts the node's Service proxy: kube-proxy in its mode, or
// vnetlab's (its maps and programs journaled as pins, so teardown removes
// them after stopping it).
func (b *builder) startProxy(n node, kubeconfig string) error {
	if p, err := clusternet.GetProxy(b.spec.Proxy); err == nil && p.CNI != "" {
		return nil // the CNI's agent (startCilium)
	}
	if !clusternet.IsVnetlab(b.spec.Proxy) {
		return b.daemon(n.ns, n.name+proxyLogSuffix(b.spec.Proxy), b.k8s(binaries.KubeProxy), "--config", filepath.Join(n.dir, kubeProxyConfig))
	}
	plane := ProxyPlane(b.spec.Name, n.name)
	if err := b.l.Journal().Record(lab.KindPin, filepath.Join(lab.BPFRoot, plane)); err != nil {
		return err
	}
	cg, err := NodeCgroup(n.name)
	if err != nil {
		return err
	}
	args := append([]string{"kube-proxy", "--kubeconfig", kubeconfig, "--node", n.name, "--netns", n.ns, "--plane", plane}, append(b.spec.proxyPodLinks(), "--node-ip", join(n.ips), "--uplink", uplink)...)
	args = append(args, "--mode", b.spec.Proxy, "--cgroup", cg)
	if b.spec.SocketLB {
		args = append(args, "--socket-lb")
	}
	return b.daemon(n.ns, n.name+proxyLogSuffix(b.spec.Proxy), b.self, args...)
}

// proxyLogSuffix ends the name of a node's proxy's daemon and log.
func proxyLogSuffix(proxy string) string {
	if clusternet.IsVnetlab(proxy) {
		return "-vnetlab-proxy"
	}
	return "-kube-proxy"
}

// proxyPodLinks tells vnetlab's proxy where the CNI put the pods: the ports
// of the bridge CNI's cni0; vnetlab's CNI's node ends (vnl..., veth-routed
// and bridge: the proxy attaches its programs to them); or, with veth-ebpf,
// nothing to attach: the CNI's host-routing programs on every pod are the
// Service programs, and the proxy fills the maps of the same plane
// (NodePlane = ProxyPlane), so each node runs one eBPF program per pod.
func (s Spec) proxyPodLinks() []string {
	switch {
	case s.CNI != clusternet.CNIVnetlab:
		return []string{"--bridge", PodBridge}
	case s.programsByCNI():
		return []string{"--programs-by-cni"}
	}
	return []string{"--veth-prefix", cni.HostIfPrefix}
}

// programsByCNI: the CNI made each node's eBPF plane and its programs on
// the pods read the Service maps (vnetlab's veth-ebpf); the plane outlives
// any proxy. With another CNI a node's plane is its vnetlab proxy's alone.
func (s Spec) programsByCNI() bool {
	return s.CNI == clusternet.CNIVnetlab && s.cniMode() == modes.VethEBPF
}

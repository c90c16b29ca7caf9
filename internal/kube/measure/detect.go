package measure

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// CNI DaemonSets known by name in kube-system (or their own namespaces).
var cniDaemonSets = map[string]string{
	"calico-node": "calico", "cilium": "cilium", "kube-flannel-ds": "flannel", "kindnet": "kindnet",
	"weave-net": "weave", "antrea-agent": "antrea", "kube-router": "kube-router", "aws-node": "aws-vpc-cni",
	"azure-cni": "azure-cni", "canal": "canal", "ovnkube-node": "ovn-kubernetes",
}

var proxyModeRE = regexp.MustCompile(`(?m)^mode:\s*"?([a-z]*)"?`)

// Detect fills what it can find through the API; local (a local cluster's
// own network, as it was built) wins over detection.
func (s *Session) Detect(ctx context.Context, local *clusternet.Network) *results.Cluster {
	f := &results.Cluster{ServerVersion: s.Version, Namespace: s.Namespace, HowDetected: map[string]string{"server_version": "GET /version"}}
	for _, n := range s.Nodes {
		nf := results.ClusterNode{Name: n.Name, Kernel: n.Status.NodeInfo.KernelVersion, OS: n.Status.NodeInfo.OSImage,
			ContainerRuntime: n.Status.NodeInfo.ContainerRuntimeVersion, Kubelet: n.Status.NodeInfo.KubeletVersion}
		for _, a := range n.Status.Addresses {
			if a.Type == "InternalIP" {
				nf.InternalIP = a.Address
			}
		}
		f.Nodes = append(f.Nodes, nf)
	}
	f.HowDetected["nodes"] = "node status (nodeInfo)"
	if local != nil {
		f.SetNetwork(*local, "")
		f.HowDetected["cni"] = "the local cluster's configuration (vnetlab kube up)"
		f.HowDetected["kube_proxy_mode"] = "the local cluster's configuration (vnetlab kube up --proxy)"
		return f
	}
	cni, howCNI := detectCNI(ctx, s.Client)
	mode, howProxy := detectProxyMode(ctx, s.Client)
	f.SetNetwork(clusternet.FromText(cni, mode), cni)
	f.HowDetected["cni"], f.HowDetected["kube_proxy_mode"] = howCNI, howProxy
	return f
}

func detectCNI(ctx context.Context, cs kubernetes.Interface) (string, string) {
	list, err := cs.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return "unknown", fmt.Sprintf("listing DaemonSets failed: %v", err)
	}
	var found []string
	for _, d := range list.Items {
		if cni, ok := cniDaemonSets[d.Name]; ok {
			found = append(found, cni)
		}
	}
	sort.Strings(found)
	if len(found) == 0 {
		return "unknown", "no DaemonSet of a known CNI (calico, cilium, flannel, kindnet, ...)"
	}
	return strings.Join(found, "+"), "DaemonSet names"
}

func detectProxyMode(ctx context.Context, cs kubernetes.Interface) (string, string) {
	cm, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if err != nil {
		return "unknown", "no ConfigMap kube-system/kube-proxy (kube-proxy replaced, or not deployed by kubeadm)"
	}
	for _, v := range cm.Data {
		if m := proxyModeRE.FindStringSubmatch(v); m != nil {
			if m[1] == "" {
				return "iptables", "ConfigMap kube-system/kube-proxy (mode empty: the Linux default, iptables)"
			}
			return m[1], "ConfigMap kube-system/kube-proxy"
		}
	}
	return "unknown", "ConfigMap kube-system/kube-proxy has no mode"
}

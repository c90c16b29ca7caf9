package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/system/rootns"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// recordSysctls journals the machine-wide sysctls kubelet changes, with the
// values to restore: the machine's own, also when another local cluster's
// kubelet already changed them.
func (b *builder) recordSysctls() error {
	orig := map[string]string{}
	if others, err := lab.List(); err == nil {
		for _, o := range others {
			if o.Name != b.spec.Name && o.Mode == lab.KubeMode {
				for k, v := range lab.JournalValues(o.Name, lab.KindSysctl) {
					orig[k] = v
				}
			}
		}
	}
	for _, s := range rootns.KubeletSysctls {
		v, ok := orig[s]
		if !ok {
			var err error
			if v, err = lab.ReadSysctl(s); err != nil {
				return err
			}
		}
		if err := b.l.Journal().Record(lab.KindSysctl, s+" "+v); err != nil {
			return err
		}
	}
	return nil
}

// Paths kubelet and containerd use whatever their configuration says.
// (CiliumRun: the mount point of each Cilium daemon's own run directory.)
var machinePaths = []string{"/var/lib/kubelet", "/var/log/containers", "/run/containerd", CiliumRun}

// recordMachinePaths journals the fixed paths the daemons will create, when
// they do not exist yet and no other local cluster could be using them.
func (b *builder) recordMachinePaths() error {
	others, _ := List()
	for _, o := range others {
		if o.Name != b.spec.Name {
			return nil
		}
	}
	for _, p := range machinePaths {
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := b.l.Journal().Record(lab.KindDir, p); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) startNode(ctx context.Context, n node, img, tarPath, kubeconfig string) error {
	b.say("node %s: containerd, kubelet, %s%s", n.name, b.spec.proxyProcess(), b.spec.policyProcess())
	for _, d := range []string{"containerd", "cni", "cni-ipam", "runc", "pod-logs", "kubelet"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	binDir, err := b.cniBinDir(n)
	if err != nil {
		return err
	}
	data := map[string]string{"CNIBinDir": binDir, "Dir": n.dir, "Image": img, "CgroupRoot": "/" + cgroup.KubeSub + "/" + n.name,
		"IP": n.ips[0].String(), "DNS": b.addrs.dnsIP().String(), "Domain": ClusterDomain, "Kubeconfig": kubeconfig, "Node": n.name,
		"ClusterCIDR": b.addrs.clusterCIDRs(), "Bridge": PodBridge, "Ranges": cniRanges(n.podRanges), "Routes": cniDefaultRoutes(n.podRanges)}
	files := map[string]*template.Template{"containerd.toml": containerdTmpl, "kubelet.yaml": kubeletTmpl}
	switch b.spec.CNI {
	case clusternet.CNIVnetlab:
		if err := b.writeVnetlabCNI(n); err != nil {
			return err
		}
	case clusternet.CNIFlannel:
		// written from flanneld's subnet.env once it runs (writeFlannelCNI)
	case clusternet.CNICilium:
		// written by the node's agent once it is ready (startCilium)
		if err := b.prepareCiliumNode(n); err != nil {
			return err
		}
	default:
		files["cni/10-vnetlab.conflist"] = cniTmpl
	}
	for name, t := range files {
		if err := writeTemplate(filepath.Join(n.dir, name), t, data); err != nil {
			return err
		}
	}
	if err := b.writeKubeProxyConfig(n, kubeProxyConfig, b.spec.Proxy); err != nil {
		return err
	}
	if err := cgroup.CreateKubeTree(n.name, func(p string) error { return b.l.Journal().Record(lab.KindCgroupTree, p) }); err != nil {
		return err
	}
	containerd, _ := exec.LookPath("containerd")
	if err := b.daemon(n.ns, n.name+"-containerd", containerd, "--config", filepath.Join(n.dir, "containerd.toml")); err != nil {
		return err
	}
	sock := filepath.Join(n.dir, "containerd", "containerd.sock")
	if err := waitFor(ctx, 30*time.Second, "containerd's socket "+sock, func() bool { _, err := os.Stat(sock); return err == nil }); err != nil {
		return err
	}
	tars := []string{tarPath, b.dnsTar}
	for _, t := range []string{b.flannelTar, b.kubeRouterTar} {
		if t != "" {
			tars = append(tars, t)
		}
	}
	for _, t := range tars {
		if err := ImportImage(ctx, sock, t); err != nil {
			return err
		}
	}
	args := []string{"--config", filepath.Join(n.dir, "kubelet.yaml"),
		"--kubeconfig", kubeconfig, "--root-dir", filepath.Join(n.dir, "kubelet"), "--hostname-override", n.name,
		"--node-ip", join(n.ips)}
	if n.labels != "" {
		args = append(args, "--node-labels", n.labels)
	}
	if err := b.daemon(n.ns, n.name+"-kubelet", b.k8s(binaries.Kubelet), args...); err != nil {
		return err
	}
	if err := b.startProxy(n, kubeconfig); err != nil {
		return err
	}
	return b.startNodePolicy(n, kubeconfig)
}

// ImportImage loads an image archive into a node's containerd (the
// namespace kubelet's CRI uses).
func ImportImage(ctx context.Context, sock, tarPath string) error {
	out, err := exec.CommandContext(ctx, "ctr", "-a", sock, "-n", "k8s.io", "images", "import", tarPath).CombinedOutput()
	if err != nil {
		return fmt.Errorf("import %s: %v: %s", tarPath, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NodeCgroup is a node's directory in the unified (cgroup v2) hierarchy:
// its pods are below it (kubelet's cgroupRoot, which runc mirrors there),
// and vnetlab's socket programs are attached to it (pinned links under the
// node's ProxyPlane directory, removed by kube down). Processes started in
// it and in the node's namespace are the node's own (NodeCommand).
func NodeCgroup(node string) (string, error) {
	root, err := cgroup.Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, NodeCgroupPath(node)), nil
}

// NodeCgroupPath is node's cgroup as /proc/PID/cgroup names it (from the
// hierarchy's root): its pods' cgroups are below it.
func NodeCgroupPath(node string) string { return filepath.Join("/", cgroup.KubeSub, node) }

// NodeCommand is a command run as one of a node's own processes: in its
// network namespace and its cgroup (NodeCgroup), where vnetlab's socket
// programs translate ClusterIPs as kube-proxy's OUTPUT chain would.
func NodeCommand(ctx context.Context, st *lab.State, node, path string, args ...string) (*proc.Cmd, error) {
	for _, n := range st.Nodes {
		if n.Name != node {
			continue
		}
		c := proc.Command(ctx, n.NS, path, args...)
		cg, err := NodeCgroup(n.Name)
		if err == nil {
			err = c.InCgroup(cg)
		}
		return c, err
	}
	return nil, fmt.Errorf("cluster %s has no node %s", st.Name, node)
}

// nodeQuery asks a DNS server from a process of node n (`vnetlab kube
// resolve --server`).
func (b *builder) nodeQuery(ctx context.Context, n node, server, name string) ([]net.IP, error) {
	c, err := NodeCommand(ctx, b.l.State, n.name, b.self, "kube", "resolve", "--server", server, name)
	if err != nil {
		return nil, err
	}
	out, err := c.Output()
	if err != nil {
		return nil, err
	}
	var ips []net.IP
	for _, f := range strings.Fields(string(out)) {
		if ip := net.ParseIP(f); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips, nil
}

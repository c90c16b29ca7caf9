// Package cluster runs a real multi-node Kubernetes on this machine, every
// part in a network namespace of its own: the control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) in one, each node
// (containerd + runc, kubelet, kube-proxy, CNI bridge + host-local) in its
// own. A cluster is a vnetlab lab of mode "kube": its journal, ownership marks
// and teardown (`vnetlab kube down`, `vnetlab clean`) are the lab's.
package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// node is one node being built.
type node struct {
	name, ns, dir string
	ip            net.IP
	pods          *net.IPNet
	// ips and podRanges are the node's addresses and pod ranges of every
	// family of the cluster, the primary first (ip and pods are IPv4's).
	ips       []net.IP
	podRanges []*net.IPNet
	labels    string // kubelet's --node-labels ("": none)
}

// builder holds what Up needs between steps.
type builder struct {
	l     *lab.Lab
	spec  Spec
	addrs addrPlan
	dir   string
	bin   string
	self  string
	pki   pki
	nodes []node
	say   func(string, ...any)
	// CoreDNS's image and its archive
	dnsRef, dnsTar string
	// flannel's image and its archive, with --cni flannel
	flannelRef, flannelTar string
	// Cilium's build (binaries.EnsureCilium), with --cni cilium
	cilium string
	// kube-router's image and its archive, with --network-policy kube-router
	kubeRouterRef, kubeRouterTar string
	// daemons started, checked alive once the cluster is up
	daemons []daemon
}

// programsFor finds what a cluster's processes run: this binary
// (vnetlab's proxy and CNI) and Kubernetes' (binaries.Ensure: cached or
// built). A vnetlab proxy needs cgroup v2 too: vnetlab-ebpf and
// vnetlab-sock both attach socket programs to the nodes' cgroups
// (NodeCgroup).
func programsFor(ctx context.Context, proxy string, say func(string, ...any)) (self, bin string, err error) {
	if clusternet.IsVnetlab(proxy) {
		if _, err := cgroup.Root(); err != nil {
			return "", "", field.Errorf("proxy", "{proxy} %s: %v", proxy, err)
		}
	}
	if self, err = engine.SelfBinary(); err != nil {
		return "", "", err
	}
	bin, err = binaries.Ensure(ctx, say)
	return self, bin, err
}

// Up builds and starts a cluster and waits until its nodes are Ready. On
// failure or Ctrl-C, everything already made is removed.
func Up(ctx context.Context, spec Spec, say func(string, ...any)) (*lab.State, error) {
	if say == nil {
		say = func(string, ...any) {}
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := preflight(); err != nil {
		return nil, err
	}
	self, bin, err := programsFor(ctx, spec.Proxy, say)
	if err != nil {
		return nil, err
	}
	dnsRef, dnsTar, err := coreDNSImage(ctx, say)
	if err != nil {
		return nil, err
	}
	var flannelRef, flannelTar string
	if spec.CNI == clusternet.CNIFlannel {
		if flannelRef, flannelTar, err = flannelImage(ctx, say); err != nil {
			return nil, err
		}
	}
	var ciliumDir string
	if spec.CNI == clusternet.CNICilium {
		if err := ciliumPreflight(); err != nil {
			return nil, err
		}
		if ciliumDir, err = binaries.EnsureCilium(ctx, say); err != nil {
			return nil, err
		}
	}
	var kubeRouterRef, kubeRouterTar string
	if spec.networkPolicy() == clusternet.PolicyKubeRouter {
		if kubeRouterRef, kubeRouterTar, err = kubeRouterImage(ctx, say); err != nil {
			return nil, err
		}
	}
	l, err := lab.Reserve(spec.Name, lab.KubeMode)
	if err != nil {
		return nil, err
	}
	b := &builder{l: l, spec: spec, addrs: addrPlan{fam: spec.Family.Or()}, dir: lab.Dir(spec.Name), bin: bin, self: self, say: say, dnsRef: dnsRef, dnsTar: dnsTar,
		flannelRef: flannelRef, flannelTar: flannelTar, cilium: ciliumDir, kubeRouterRef: kubeRouterRef, kubeRouterTar: kubeRouterTar}
	if err := b.build(ctx); err != nil {
		say("removing the half-built cluster %s", spec.Name)
		_ = l.Teardown(nil)
		return nil, err
	}
	l.State.Status = "ready"
	if err := l.Save(); err != nil {
		return nil, err
	}
	l.Release()
	return l.State, nil
}

// Programs a cluster runs besides the built Kubernetes commands.
var hostPrograms = map[string]string{"etcd": "etcd-server", "containerd": "containerd", "containerd-shim-runc-v2": "containerd", "runc": "runc", "ctr": "containerd"}

func preflight() error {
	for prog, pkg := range hostPrograms {
		if _, err := exec.LookPath(prog); err != nil {
			if _, err := os.Stat("/usr/sbin/" + prog); err != nil {
				return fmt.Errorf("a local cluster needs %s (Debian package %s): run scripts/install-deps.sh", prog, pkg)
			}
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat("/usr/lib/cni/" + p); err != nil {
			return fmt.Errorf("a local cluster needs the CNI plugin /usr/lib/cni/%s (Debian package containernetworking-plugins): run scripts/install-deps.sh", p)
		}
	}
	return nil
}

func (b *builder) build(ctx context.Context) error {
	st := b.l.State
	k := b.spec.Name
	st.Facts = b.spec.networkFacts()
	st.Facts[FactVersion], st.Facts[FactDNS] = binaries.Version, b.addrs.dnsIP().String()
	// The namespaces get the family's sysctls (lab.CreateNS).
	st.Spec.Family = b.addrs.fam
	cpNS := lab.NSName(k, cpWho)
	for i := 1; i <= b.spec.Nodes; i++ {
		n := node{name: NodeName(k, i), ns: lab.NSName(k, fmt.Sprintf("node%d", i)), ip: modes.NthIP(nodeNet, 10+i), pods: podCIDR(i),
			ips: b.addrs.nodeIPs(i), podRanges: b.addrs.podCIDRs(i), labels: b.spec.nodeLabels(i)}
		n.dir = filepath.Join(b.dir, n.name)
		b.nodes = append(b.nodes, n)
		ns := lab.NodeState{Name: n.name, NS: n.ns, IP: n.ip.String(), Uplink: uplink}
		if b.addrs.fam.HasIPv6() {
			ns.IP6 = n.ips[len(n.ips)-1].String()
		}
		st.Nodes = append(st.Nodes, ns)
	}
	st.Ext = cpNS
	if err := b.l.Save(); err != nil {
		return err
	}
	b.say("network: control plane %s and %d node namespaces", cpNS, len(b.nodes))
	if err := b.wire(cpNS); err != nil {
		return err
	}
	var err error
	if b.pki, err = writePKI(filepath.Join(b.dir, "pki"), []net.IP{apiIP, apiIP6, net.IPv4(127, 0, 0, 1), b.addrs.kubernetesIP()}); err != nil {
		return err
	}
	internal := InternalKubeconfig(k)
	if err := writeTemplate(internal, kubeconfigTmpl, map[string]string{"Cluster": k, "Server": fmt.Sprintf("https://%s:%d", apiIP, apiPort), "CA": b.pki.path("ca.crt"), "Token": b.pki.token}); err != nil {
		return err
	}
	port, err := b.startForwarder(cpNS)
	if err != nil {
		return err
	}
	external := filepath.Join(b.dir, "kubeconfig")
	st.Facts[FactKubeconfig], st.Facts[FactServer] = external, fmt.Sprintf("https://127.0.0.1:%d", port)
	if err := writeTemplate(external, kubeconfigTmpl, map[string]string{"Cluster": k, "Server": st.Facts[FactServer], "CA": b.pki.path("ca.crt"), "Token": b.pki.token}); err != nil {
		return err
	}
	if err := b.l.Save(); err != nil {
		return err
	}
	if err := b.startControlPlane(cpNS); err != nil {
		return err
	}
	cs, err := Client(external)
	if err != nil {
		return err
	}
	b.say("waiting for the API server")
	if err := waitFor(ctx, time.Minute, "the API server to answer /readyz (see "+b.logPath("kube-apiserver")+")", func() bool {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil
	}); err != nil {
		return err
	}
	if err := b.startControllers(internal); err != nil {
		return err
	}
	// Scheduled as soon as a node is Ready.
	if err := createDNS(ctx, cs, b.dnsRef, b.addrs.dnsIP()); err != nil {
		return err
	}
	img, err := image.Build(b.self)
	if err != nil {
		return err
	}
	st.Facts[FactImage] = img.Ref
	tarPath := filepath.Join(b.dir, "image.tar")
	if err := img.Write(tarPath); err != nil {
		return err
	}
	if err := b.recordSysctls(); err != nil {
		return err
	}
	if err := b.recordMachinePaths(); err != nil {
		return err
	}
	// Cilium's operator after the machine's paths are journaled: it is
	// given /run/cilium (CiliumRun), which kube down removes.
	if b.cilium != "" {
		if err := b.startCiliumOperator(internal); err != nil {
			return err
		}
	}
	for _, n := range b.nodes {
		if err := b.startNode(ctx, n, img.Ref, tarPath, internal); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	if b.cilium != "" {
		if err := b.startCilium(ctx, cs, internal); err != nil {
			return err
		}
	}
	if b.flannelRef != "" {
		if err := b.startFlannel(ctx, cs); err != nil {
			return err
		}
	}
	if b.kubeRouterRef != "" {
		if err := b.startKubeRouter(ctx, cs); err != nil {
			return err
		}
	}
	if err := b.waitPolicy(ctx); err != nil {
		return err
	}
	b.say("waiting for %d nodes to be Ready", len(b.nodes))
	if err := b.waitNodesReady(ctx, cs, "to be Ready"); err != nil {
		return err
	}
	b.say("waiting for cluster DNS (CoreDNS, Service %s/%s at %s)", dnsNamespace, dnsService, b.addrs.dnsIP())
	if err := waitDNS(ctx, b.addrs, b.dnsQuery(ctx, b.nodes[0])); err != nil {
		return err
	}
	return b.checkDaemons()
}

// dnsQuery asks a DNS server from node n as its Service proxy serves the
// node: from its namespace, or with a proxy that translates ClusterIPs
// for the sockets of the node's cgroup only (vnetlab's, Cilium's;
// kube-proxy's OUTPUT chain sees every socket of the namespace), from a
// process of the node (IPv4 only: Spec.validateFamily).
func (b *builder) dnsQuery(ctx context.Context, n node) func(server, name string, t dnsmessage.Type) ([]net.IP, error) {
	if p, err := clusternet.GetProxy(b.spec.Proxy); err == nil && p.NodeCgroup {
		return func(server, name string, _ dnsmessage.Type) ([]net.IP, error) {
			return b.nodeQuery(ctx, n, server, name)
		}
	}
	return func(server, name string, t dnsmessage.Type) ([]net.IP, error) {
		return Query(ctx, n.ns, server, name, t)
	}
}

// Client is a clientset for a kubeconfig file.
func Client(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// waitNodesReady waits until every node of the cluster is Ready (what:
// the wait's words in its error).
func (b *builder) waitNodesReady(ctx context.Context, cs kubernetes.Interface, what string) error {
	return waitFor(ctx, waitReady, fmt.Sprintf("%d nodes %s (see the kubelet logs under %s)", len(b.nodes), what, b.dir), func() bool {
		return readyNodes(ctx, cs) == len(b.nodes)
	})
}

func readyNodes(ctx context.Context, cs kubernetes.Interface) int {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready
}

// waitFor polls ok every half second until it holds, ctx ends or limit passes.
func waitFor(ctx context.Context, limit time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for {
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s waiting for %s", limit, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

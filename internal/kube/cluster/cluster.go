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
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vnetlab/vnetlab/internal/cgroup"
	"github.com/vnetlab/vnetlab/internal/engine"
	"github.com/vnetlab/vnetlab/internal/field"
	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/network"
	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/nsutil"
	"github.com/vnetlab/vnetlab/internal/proc"
	"github.com/vnetlab/vnetlab/internal/rootns"
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

// Spec is what `kube up` builds.
type Spec struct {
	Name  string
	Nodes int
	Proxy string // one of network.Proxies
	// CNI wires the pods: network.CNIBridge ("" too) or network.CNIVnetlab
	// with CNIMode (cni.go).
	CNI, CNIMode string
	// SocketLB (--socket-lb, with vnetlab-ebpf): the nodes' socket programs
	// translate the pods' connections too (proxy.Config.SocketLB).
	SocketLB bool
}

// Facts keys of a cluster's lab state.
const (
	FactKubeconfig = "kubeconfig"
	FactServer     = "server"
	FactVersion    = "version"
	FactProxy      = "proxy"
	FactImage      = "image"
	FactCNI        = "cni"        // network.Network.CNIText(), for people
	FactCNIPlugin  = "cni_plugin" // network.CNIBridge or network.CNIVnetlab
	FactCNIMode    = "cni_mode"   // with network.CNIVnetlab
	FactSocketLB   = "socket_lb"  // "true" with --socket-lb
)

// Network is the cluster's network as its facts say (clusters built before
// the cni_plugin fact: read back from its text).
func Network(st *lab.State) network.Network {
	f := st.Facts
	if f[FactCNIPlugin] == "" {
		n := network.FromText(f[FactCNI], f[FactProxy])
		n.SocketLB = f[FactSocketLB] == "true"
		return n
	}
	return network.Network{CNI: f[FactCNIPlugin], CNIMode: f[FactCNIMode], Proxy: f[FactProxy], SocketLB: f[FactSocketLB] == "true"}
}

// Network is the network the spec builds (the default CNI and mode filled in).
func (s Spec) Network() network.Network {
	n := network.Network{CNI: s.CNI, Proxy: s.Proxy, SocketLB: s.SocketLB}
	if n.CNI == "" {
		n.CNI = network.CNIBridge
	}
	if n.CNI == network.CNIVnetlab {
		n.CNIMode = s.cniMode()
	}
	return n
}

// networkFacts are the facts that record the spec's network.
func (s Spec) networkFacts() map[string]string {
	n := s.Network()
	f := map[string]string{FactProxy: n.Proxy, FactCNI: n.CNIText(), FactCNIPlugin: n.CNI}
	if n.CNIMode != "" {
		f[FactCNIMode] = n.CNIMode
	}
	if n.SocketLB {
		f[FactSocketLB] = "true"
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
	if err := s.validateCNI(); err != nil {
		return err
	}
	p, err := network.GetProxy(s.Proxy)
	if err != nil {
		return field.Errorf("proxy", "{proxy} %q: %s", s.Proxy, network.ProxyHelp())
	}
	if s.SocketLB && !p.SocketLB {
		return field.Errorf("socket_lb", "{proxy} %s with {socket_lb}: socket LB is an option of {proxy} %s (vnetlab-sock translates every socket already; kube-proxy has none)", s.Proxy, network.VnetlabEBPF)
	}
	return nil
}

// NodeName is the Kubernetes name of node i (1-based) of cluster k.
func NodeName(k string, i int) string { return fmt.Sprintf("%s-node%d", k, i) }

func mustCIDR(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }

func nthIP(n *net.IPNet, i int) net.IP {
	ip := make(net.IP, 4)
	copy(ip, n.IP.To4())
	v := int(ip[0])<<24 | int(ip[1])<<16 | int(ip[2])<<8 | int(ip[3]) + i
	return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)).To4()
}

func podCIDR(i int) *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, 244, byte(i), 0).To4(), Mask: net.CIDRMask(24, 32)}
}

// node is one node being built.
type node struct {
	name, ns, dir string
	ip            net.IP
	pods          *net.IPNet
}

// builder holds what Up needs between steps.
type builder struct {
	l     *lab.Lab
	spec  Spec
	dir   string
	bin   string
	self  string
	pki   pki
	nodes []node
	say   func(string, ...any)
	// CoreDNS's image and its archive
	dnsRef, dnsTar string
	// daemons started, checked alive once the cluster is up
	daemons []daemon
}

type daemon struct {
	name  string
	pid   int
	start uint64
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
	if network.IsVnetlab(spec.Proxy) {
		// Both attach socket programs to the nodes' cgroups (NodeCgroup).
		if _, err := cgroup.Root(); err != nil {
			return nil, field.Errorf("proxy", "{proxy} %s: %v", spec.Proxy, err)
		}
	}
	self, err := engine.SelfBinary()
	if err != nil {
		return nil, err
	}
	bin, err := binaries.Ensure(ctx, say)
	if err != nil {
		return nil, err
	}
	dnsRef, dnsTar, err := coreDNSImage(ctx, say)
	if err != nil {
		return nil, err
	}
	l, err := lab.Reserve(spec.Name, lab.KubeMode)
	if err != nil {
		return nil, err
	}
	b := &builder{l: l, spec: spec, dir: lab.Dir(spec.Name), bin: bin, self: self, say: say, dnsRef: dnsRef, dnsTar: dnsTar}
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
	st.Facts[FactVersion], st.Facts[FactDNS] = binaries.Version, dnsIP.String()
	cpNS := lab.NSName(k, cpWho)
	for i := 1; i <= b.spec.Nodes; i++ {
		n := node{name: NodeName(k, i), ns: lab.NSName(k, fmt.Sprintf("node%d", i)), ip: nthIP(nodeNet, 10+i), pods: podCIDR(i)}
		n.dir = filepath.Join(b.dir, n.name)
		b.nodes = append(b.nodes, n)
		st.Nodes = append(st.Nodes, lab.NodeState{Name: n.name, NS: n.ns, IP: n.ip.String(), Uplink: uplink})
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
	if b.pki, err = writePKI(filepath.Join(b.dir, "pki"), []net.IP{apiIP, net.IPv4(127, 0, 0, 1), nthIP(mustCIDR(serviceCIDR), 1)}); err != nil {
		return err
	}
	internal := filepath.Join(b.dir, "kubeconfig-internal")
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
	if err := createDNS(ctx, cs, b.dnsRef); err != nil {
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
	for _, n := range b.nodes {
		if err := b.startNode(ctx, n, img.Ref, tarPath, internal); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	b.say("waiting for %d nodes to be Ready", len(b.nodes))
	if err := waitFor(ctx, waitReady, fmt.Sprintf("%d nodes to be Ready (see the kubelet logs under %s)", len(b.nodes), b.dir), func() bool {
		return readyNodes(ctx, cs) == len(b.nodes)
	}); err != nil {
		return err
	}
	b.say("waiting for cluster DNS (CoreDNS, Service %s/%s at %s)", dnsNamespace, dnsService, dnsIP)
	query := func(server, name string) ([]net.IP, error) { return QueryA(ctx, b.nodes[0].ns, server, name) }
	if network.IsVnetlab(b.spec.Proxy) {
		// vnetlab's proxy translates ClusterIPs for the sockets of the
		// node's cgroup (kube-proxy's OUTPUT chain sees every socket of the
		// namespace): ask from a process of the node.
		query = func(server, name string) ([]net.IP, error) { return b.nodeQuery(ctx, b.nodes[0], server, name) }
	}
	if err := waitDNS(ctx, query); err != nil {
		return err
	}
	return b.checkDaemons()
}

// checkDaemons fails when a daemon has exited since it started.
func (b *builder) checkDaemons() error {
	for _, d := range b.daemons {
		if !proc.Alive(d.pid, d.start) {
			return fmt.Errorf("%s exited: see %s", d.name, b.logPath(d.name))
		}
	}
	return nil
}

// wire builds the control plane's bridge and each node's uplink, routes to
// every other node's pod range, and forwarding in the nodes.
func (b *builder) wire(cpNS string) error {
	if err := b.l.CreateNS(cpNS); err != nil {
		return err
	}
	cp, err := nsutil.Handle(cpNS)
	if err != nil {
		return err
	}
	defer cp.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: bridge}}
	if err := cp.LinkAdd(br); err != nil {
		return fmt.Errorf("control-plane bridge: %w", err)
	}
	if err := addrUp(cp, bridge, apiIP); err != nil {
		return err
	}
	cpFD, err := nsutil.FD(cpNS)
	if err != nil {
		return err
	}
	defer cpFD.Close()
	for _, n := range b.nodes {
		if err := b.l.CreateNS(n.ns); err != nil {
			return err
		}
		h, err := nsutil.Handle(n.ns)
		if err != nil {
			return err
		}
		defer h.Close()
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: uplink, MTU: 1500}, PeerName: n.name, PeerNamespace: netlink.NsFd(int(cpFD))}
		if err := h.LinkAdd(v); err != nil {
			return fmt.Errorf("%s uplink: %w", n.name, err)
		}
		if err := addrUp(h, uplink, n.ip); err != nil {
			return err
		}
		peer, err := cp.LinkByName(n.name)
		if err != nil {
			return err
		}
		if err := cp.LinkSetMaster(peer, br); err != nil {
			return err
		}
		if err := cp.LinkSetUp(peer); err != nil {
			return err
		}
		if err := h.RouteAdd(&netlink.Route{Gw: apiIP}); err != nil {
			return fmt.Errorf("%s default route: %w", n.name, err)
		}
		if err := cp.RouteAdd(&netlink.Route{Dst: n.pods, Gw: n.ip}); err != nil {
			return err
		}
		for _, o := range b.nodes {
			if o.name != n.name {
				if err := h.RouteAdd(&netlink.Route{Dst: o.pods, Gw: o.ip}); err != nil {
					return fmt.Errorf("%s route to %s's pods: %w", n.name, o.name, err)
				}
			}
		}
		// Per-namespace sysctls: the node routes for its pods, and bridged
		// pod-to-pod replies go through iptables/nftables so a Service's
		// translation is undone (as on every kube-proxy node).
		if err := nsutil.Do(n.ns, func() error {
			for _, s := range []string{"net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables"} {
				if err := os.WriteFile(filepath.Join("/proc/sys", strings.ReplaceAll(s, ".", "/")), []byte("1"), 0o644); err != nil {
					return fmt.Errorf("%s: %w", s, err)
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
	}
	return nil
}

func addrUp(h *netlink.Handle, name string, ip net.IP) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	ones, _ := nodeNet.Mask.Size()
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(ones, 32)}}); err != nil {
		return fmt.Errorf("address %s on %s: %w", ip, name, err)
	}
	return h.LinkSetUp(l)
}

// startForwarder listens on a free loopback port of the machine and hands
// the socket to a detached `vnetlab kube forward` (no race for the port).
func (b *builder) startForwarder(cpNS string) (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	c := proc.Command(context.Background(), "", b.self, "kube", "forward", "--ns", cpNS, "--to", fmt.Sprintf("%s:%d", apiIP, apiPort))
	c.ExtraFiles = []*os.File{f}
	if err := b.startDaemon(c, "forward"); err != nil {
		return 0, err
	}
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (b *builder) logPath(name string) string { return filepath.Join(b.dir, "logs", name+".log") }

// startDaemon starts a detached daemon with its output in logs/NAME.log and
// journals it (teardown stops it by PID).
func (b *builder) startDaemon(c *proc.Cmd, name string) error {
	if err := os.MkdirAll(filepath.Join(b.dir, "logs"), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(b.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	c.Stdout, c.Stderr = logf, logf
	c.Detach()
	if err := c.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if err := b.l.TrackProc(c.Process.Pid); err != nil {
		return fmt.Errorf("%s: %w (see %s)", name, err, b.logPath(name))
	}
	start, _ := proc.StartTime(c.Process.Pid)
	b.daemons = append(b.daemons, daemon{name: name, pid: c.Process.Pid, start: start})
	go c.Wait() // reap it if it exits while we are still here
	return nil
}

func (b *builder) daemon(ns, name, path string, args ...string) error {
	return b.startDaemon(proc.Command(context.Background(), ns, path, args...), name)
}

func (b *builder) k8s(name string) string { return filepath.Join(b.bin, name) }

func (b *builder) startControlPlane(ns string) error {
	b.say("control plane: etcd, kube-apiserver; then kube-controller-manager, kube-scheduler")
	etcd, _ := exec.LookPath("etcd")
	if err := b.daemon(ns, "etcd", etcd, "--name", "etcd", "--data-dir", filepath.Join(b.dir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "etcd=http://127.0.0.1:2380"); err != nil {
		return err
	}
	p := b.pki
	if err := b.daemon(ns, "kube-apiserver", b.k8s(binaries.APIServer),
		"--etcd-servers", "http://127.0.0.1:2379", "--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(apiPort),
		"--advertise-address", apiIP.String(), "--service-cluster-ip-range", serviceCIDR,
		"--cert-dir", filepath.Join(b.dir, "apiserver"),
		"--tls-cert-file", p.path("apiserver.crt"), "--tls-private-key-file", p.path("apiserver.key"),
		"--client-ca-file", p.path("ca.crt"), "--token-auth-file", p.path("tokens.csv"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", p.path("sa.pub"), "--service-account-signing-key-file", p.path("sa.key"),
		"--authorization-mode", "RBAC", "--allow-privileged",
		// kubectl exec/logs: reach kubelets by address (node names do not resolve).
		"--kubelet-preferred-address-types", "InternalIP", "--profiling=false"); err != nil {
		return err
	}
	return nil
}

// startControllers starts the controller-manager and the scheduler once the
// API server answers (they exit when it refuses their first request).
func (b *builder) startControllers(kubeconfig string) error {
	p := b.pki
	ns := b.l.State.Ext
	common := []string{"--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--profiling=false"}
	if err := b.daemon(ns, "kube-controller-manager", b.k8s(binaries.ControllerManager), append(common,
		"--service-account-private-key-file", p.path("sa.key"), "--root-ca-file", p.path("ca.crt"),
		// Node pod ranges are the CNI configuration's, not allocated here.
		"--allocate-node-cidrs=false", "--use-service-account-credentials=false")...); err != nil {
		return err
	}
	return b.daemon(ns, "kube-scheduler", b.k8s(binaries.Scheduler), common...)
}

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
var machinePaths = []string{"/var/lib/kubelet", "/var/log/containers", "/run/containerd"}

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
	b.say("node %s: containerd, kubelet, %s", n.name, b.spec.proxyProcess())
	for _, d := range []string{"containerd", "cni", "cni-ipam", "runc", "pod-logs", "kubelet"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	binDir, err := b.cniBinDir()
	if err != nil {
		return err
	}
	data := map[string]string{"CNIBinDir": binDir, "Dir": n.dir, "Image": img, "PodCIDR": n.pods.String(), "CgroupRoot": "/" + cgroup.KubeSub + "/" + n.name,
		"IP": n.ip.String(), "DNS": dnsIP.String(), "Domain": ClusterDomain, "Kubeconfig": kubeconfig, "Node": n.name, "Proxy": b.spec.Proxy, "ClusterCIDR": clusterCIDR.String(), "Bridge": PodBridge}
	files := map[string]*template.Template{"containerd.toml": containerdTmpl, "kubelet.yaml": kubeletTmpl, "kube-proxy.yaml": kubeProxyTmpl}
	if b.spec.CNI == network.CNIVnetlab {
		if err := b.writeVnetlabCNI(n); err != nil {
			return err
		}
	} else {
		files["cni/10-vnetlab.conflist"] = cniTmpl
	}
	for name, t := range files {
		if err := writeTemplate(filepath.Join(n.dir, name), t, data); err != nil {
			return err
		}
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
	for _, t := range []string{tarPath, b.dnsTar} {
		if err := ImportImage(ctx, sock, t); err != nil {
			return err
		}
	}
	if err := b.daemon(n.ns, n.name+"-kubelet", b.k8s(binaries.Kubelet), "--config", filepath.Join(n.dir, "kubelet.yaml"),
		"--kubeconfig", kubeconfig, "--root-dir", filepath.Join(n.dir, "kubelet"), "--hostname-override", n.name,
		"--node-ip", n.ip.String()); err != nil {
		return err
	}
	return b.startProxy(n, kubeconfig)
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

// Client is a clientset for a kubeconfig file.
func Client(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(cfg)
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

// List returns the local clusters.
func List() ([]*lab.State, error) {
	all, err := lab.List()
	var out []*lab.State
	for _, s := range all {
		if s.Mode == lab.KubeMode {
			out = append(out, s)
		}
	}
	return out, err
}

// Load returns a local cluster's state, refusing labs that are not clusters.
func Load(name string) (*lab.State, error) {
	st, err := lab.Load(name)
	if err != nil {
		return nil, fmt.Errorf("no local cluster named %q (see `vnetlab kube ls`)", name)
	}
	if st.Mode != lab.KubeMode {
		return nil, fmt.Errorf("%s is a vnetlab lab (mode %s), not a local cluster: see `vnetlab kube ls`", name, st.Mode)
	}
	if st.Status != "ready" {
		return nil, fmt.Errorf("cluster %s is %s: wait for `kube up` to finish, or remove it with `vnetlab kube down %s`", name, st.Status, name)
	}
	return st, nil
}

// Down removes a local cluster: its processes, containers, cgroups, mounts,
// state and namespaces, and restores the sysctls kubelet changed.
func Down(name string, say func(string, ...any)) error {
	st, err := lab.Load(name)
	if err != nil {
		return fmt.Errorf("no local cluster named %q (see `vnetlab kube ls`)", name)
	}
	if st.Mode != lab.KubeMode {
		return fmt.Errorf("%s is a vnetlab lab (mode %s), not a local cluster: remove it with `vnetlab down %s`", name, st.Mode, name)
	}
	return lab.Down(name, say)
}

// LoadImages imports image archives into every node of a local cluster.
func LoadImages(ctx context.Context, name string, tars []string) error {
	st, err := Load(name)
	if err != nil {
		return err
	}
	for _, t := range tars {
		if _, err := os.Stat(t); err != nil {
			return fmt.Errorf("image archive %s: %w", t, err)
		}
	}
	for _, n := range st.Nodes {
		sock := filepath.Join(lab.Dir(name), n.Name, "containerd", "containerd.sock")
		for _, t := range tars {
			if err := ImportImage(ctx, sock, t); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

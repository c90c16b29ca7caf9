package proxy

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Config is one node's proxy.
type Config struct {
	Kubeconfig string
	Node       string // the node's Kubernetes name (internalTrafficPolicy Local)
	NetNS      string // the node's network namespace (name under /run/netns); the process runs in it
	Plane      string // the pin directory name of the node's maps (cluster.ProxyPlane)
	// The pods' node-side veths, which get the programs, are found by one
	// of (PodLinks says which is set):
	Bridge     string // the CNI's bridge: its ports (Debian's bridge plugin: cni0)
	VethPrefix string // the start of their names (vnetlab's CNI: "vnl")
	// ByCNI: the CNI puts the programs on the pods itself (vnetlab's
	// veth-ebpf: its host-routing programs translate Services too): the
	// proxy only fills the Service maps of the plane the CNI attached.
	ByCNI bool
	// Mode is the data plane: ModeEBPF ("" too: tc programs on the pods'
	// veths) or ModeSock (socket programs on Cgroup, no tc program).
	Mode string
	// Cgroup is the node's cgroup v2 directory (its pods are below it).
	// ModeSock attaches the socket programs there for every socket;
	// ModeEBPF, when set, for the sockets of the node's own network
	// namespace (its processes, hostNetwork pods), not the pods' (tc's).
	Cgroup string
	// SocketLB (ModeEBPF, with Cgroup): the socket programs translate the
	// pods' connect()/sendmsg() too (Cilium's socket LB), so their
	// connections carry the backend's address on the wire and the tc
	// programs find nothing to translate; Services without endpoints or
	// with sessionAffinity stay the tc programs' (bpf/sock.c pods_via_tc).
	SocketLB bool
	// NodeIP holds the node's addresses NodePorts answer on, one per family,
	// comma-separated as kubelet's --node-ip ("": the Node's InternalIPs
	// from the API); Uplink the interface that carries them, which gets the
	// NodePort programs ("": NodePorts only for the node's pods).
	NodeIP, Uplink string
	// HealthzAddr is where the proxy health server listens (/healthz,
	// /livez: kube-proxy's --healthz-bind-address, DefaultHealthzAddr);
	// MetricsAddr the status server's (/proxyMode, /healthz and /metrics,
	// kube-proxy's metrics (metrics.go): kube-proxy's --metrics-bind-address,
	// DefaultMetricsAddr). "": none.
	HealthzAddr, MetricsAddr string
	// TCPCloseWaitTimeout is set as the node namespace's
	// nf_conntrack_tcp_timeout_close_wait at start, as kube-proxy's
	// --conntrack-tcp-timeout-close-wait (DefaultTCPCloseWaitTimeout;
	// 0 leaves it).
	TCPCloseWaitTimeout time.Duration
	Logf                func(string, ...any)
}

// The data planes Run can drive (kube up's --proxy values, named in
// internal/vocab/clusternet).
const (
	ModeEBPF = clusternet.VnetlabEBPF
	ModeSock = clusternet.VnetlabSock
)

// PodLinks checks that exactly one way to find the pods' veths is set and
// says which ("" and an error naming the flags otherwise).
func (c Config) PodLinks() (string, error) {
	var set []string
	if c.Bridge != "" {
		set = append(set, "--bridge "+c.Bridge)
	}
	if c.VethPrefix != "" {
		set = append(set, "--veth-prefix "+c.VethPrefix)
	}
	if c.ByCNI {
		set = append(set, "--programs-by-cni")
	}
	if len(set) != 1 {
		got := "none"
		if len(set) > 1 {
			got = strings.Join(set, " and ")
		}
		return "", fmt.Errorf("say how the pods' veths are found with exactly one of --bridge NAME (ports of the CNI's bridge), --veth-prefix P (veths named P...) or --programs-by-cni (the CNI attaches the programs); got %s", got)
	}
	return set[0], nil
}

// LabelSelector is what the proxy's informers watch, Services and
// EndpointSlices alike, as kube-proxy's do: objects without the label
// service.kubernetes.io/service-proxy-name (a Service for another proxy:
// kube-proxy serves one only when it names kube-proxy's own name, empty by
// default, so never) and without service.kubernetes.io/headless (on the
// slices of a headless Service). A Service or slice that gains such a
// label leaves the watch, which the informer reports as a delete; it comes
// back as an add when it loses it.
func LabelSelector() labels.Selector {
	sel := labels.NewSelector()
	for _, l := range []string{proxyNameLabel, corev1.IsHeadlessService} {
		r, err := labels.NewRequirement(l, selection.DoesNotExist, nil)
		if err != nil {
			panic(err) // constant, valid label names
		}
		sel = sel.Add(*r)
	}
	return sel
}

// proxyNameLabel names the proxy that serves a Service (k8s.io/kubernetes'
// pkg/proxy/apis.LabelServiceProxyName).
const proxyNameLabel = "service.kubernetes.io/service-proxy-name"

// Run follows the API server and keeps the node's maps in step until ctx
// ends. The maps and programs stay when it returns: a restarted proxy
// picks them up and changes only what changed meanwhile (kube-proxy leaves
// its rules the same way).
func Run(ctx context.Context, c Config) error {
	logf := c.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	how, err := c.PodLinks()
	if err != nil {
		return err
	}
	if err := setConntrackSysctls(nsutil.Path(c.NetNS), c.TCPCloseWaitTimeout, logf); err != nil {
		return err
	}
	cs, err := newClient(c.Kubeconfig)
	if err != nil {
		return err
	}
	nodeIPs, err := resolveNodeIPs(ctx, cs, c.Node, c.NodeIP)
	if err != nil {
		return err
	}
	planes, err := openPlanes(c, family.OfAddrs(nodeIPs), logf)
	if err != nil {
		return err
	}
	defer planes.Close()
	if err := c.attachUplink(planes, nodeIPs, logf); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	status := newProxyHealth(familiesOf(nodeIPs), HealthTimeout, nil)
	health := newHealthServers(logf)
	health.healthy = status.Healthy
	defer health.Close()
	p, err := NewProxier(c.Node, nodeIPs, planes.services, planes.flows, health, logf)
	if err != nil {
		return err
	}
	p.status = status
	logf("maps %s (%s): %d entries from before", planes.dir, c.mode(), p.Len())
	m := NewMetrics(nodeIPs)
	p.Instrument(m)
	if _, err := serveOn(ctx, "proxy health server (/healthz, /livez)", c.HealthzAddr, status.Handler(), logf); err != nil {
		return err
	}
	if _, err := serveOn(ctx, "status server (/proxyMode, /metrics)", c.MetricsAddr, statusHandler(c.mode(), m.Handler()), logf); err != nil {
		return err
	}

	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LabelSelector().String()
	}))
	defer factory.Shutdown()
	svcs, err := factory.Core().V1().Services().Informer().AddEventHandler(p.ServiceHandler())
	if err != nil {
		return err
	}
	slices, err := factory.Discovery().V1().EndpointSlices().Informer().AddEventHandler(p.SliceHandler())
	if err != nil {
		return err
	}
	// The node's own Node: whether it is being deleted (/healthz).
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, c.Node).String()
	}))
	defer nodeFactory.Shutdown()
	nodeReg, err := nodeFactory.Core().V1().Nodes().Informer().AddEventHandler(p.NodeHandler())
	if err != nil {
		return err
	}

	logf("pods' programs: %s", how)
	linkErr := make(chan error, 1)
	if !c.ByCNI && planes.tc != nil {
		links := &linkWatcher{plane: planes.tc, ns: c.NetNS, bridge: c.Bridge, prefix: c.VethPrefix, logf: logf}
		go func() {
			err := links.run(ctx)
			if err != nil {
				logf("link watcher: %v", err)
			}
			linkErr <- err
			cancel()
		}()
	}

	start := time.Now()
	status.started()
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	// The handlers' registrations: synced once each has seen the whole
	// first listing, so the first Sync prunes nothing a Service claims.
	if !cache.WaitForCacheSync(ctx.Done(), svcs.HasSynced, slices.HasSynced, nodeReg.HasSynced) {
		return linkOr(linkErr, fmt.Errorf("the informers never synced: %w", ctx.Err()))
	}
	total, err := p.SyncMeasured()
	if err != nil {
		logf("first sync: %v (retrying)", err)
	}
	logf("synced %d entries (+%d ~%d -%d) in %s", p.Len(), total.Added, total.Updated, total.Deleted, time.Since(start).Round(time.Millisecond))
	p.Loop(ctx)
	return linkOr(linkErr, nil)
}

// newClient is a client of the API server for informers.
func newClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	// Informers only watch: the default client rate limit would slow the
	// first listing and every relist after an API server restart.
	rc.QPS, rc.Burst = 1000, 2000
	return kubernetes.NewForConfig(rc)
}

// attachUplink puts the NodePort programs on the node's uplink and tells
// them the node's addresses: traffic from other nodes and outside to a
// node port or external IP (the node's own sockets and, with the socket
// plane, its pods' are translated at connect()).
func (c Config) attachUplink(planes *planes, nodeIPs []netip.Addr, logf func(string, ...any)) error {
	if c.Uplink == "" {
		return nil
	}
	if _, err := planes.uplink.AttachUplink(c.NetNS, c.Uplink); err != nil {
		return err
	}
	for _, ip := range nodeIPs {
		if err := planes.uplink.SetNodeIP(ip); err != nil {
			return err
		}
	}
	logf("NodePorts and external IPs on %v (%s): programs on %s", nodeIPs, c.Node, c.Uplink)
	return nil
}

// linkOr is the link watcher's error if it stopped with one, else err.
func linkOr(linkErr <-chan error, err error) error {
	select {
	case lerr := <-linkErr:
		if lerr != nil {
			return lerr
		}
	default:
	}
	return err
}

// resolveNodeIPs are the node's addresses, at most one per family, IPv4
// first: given (kubelet's --node-ip form, "IP[,IP]"), or the Node object's
// InternalIPs (kubelet registers the node a moment after it starts).
func resolveNodeIPs(ctx context.Context, cs kubernetes.Interface, node, given string) ([]netip.Addr, error) {
	if given != "" {
		ips, err := nodeIPsOf(strings.Split(given, ","))
		if err != nil {
			return nil, fmt.Errorf("--node-ip %q: %w", given, err)
		}
		return ips, nil
	}
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			var internal []string
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					internal = append(internal, a.Address)
				}
			}
			if len(internal) > 0 {
				ips, err := nodeIPsOf(internal)
				if err != nil {
					return nil, fmt.Errorf("node %s's InternalIPs: %w", node, err)
				}
				return ips, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("node %s has no InternalIP (%v): give its addresses with --node-ip", node, err)
		}
		time.Sleep(time.Second)
	}
}

// nodeIPsOf parses a node's addresses: at most one per family, IPv4 first.
func nodeIPsOf(ss []string) ([]netip.Addr, error) {
	var v4, v6 []netip.Addr
	for _, s := range ss {
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		switch {
		case err != nil || a.Zone() != "" || a.Is4In6():
			return nil, fmt.Errorf("%q is not an IPv4 or IPv6 address", s)
		case a.Is4():
			v4 = append(v4, a)
		default:
			v6 = append(v6, a)
		}
	}
	if len(v4) > 1 || len(v6) > 1 {
		return nil, fmt.Errorf("at most one address per family, got %v", append(v4, v6...))
	}
	return append(v4, v6...), nil
}

// familiesOf names the families of the node's addresses (the health
// report's status keys).
func familiesOf(ips []netip.Addr) []corev1.IPFamily {
	var fs []corev1.IPFamily
	for _, ip := range ips {
		if ip.Is4() {
			fs = append(fs, corev1.IPv4Protocol)
		} else {
			fs = append(fs, corev1.IPv6Protocol)
		}
	}
	return fs
}

package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/vnetlab/vnetlab/internal/kube/network"
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
	// NodeIP is the node's address NodePorts answer on ("": the Node's
	// InternalIP from the API); Uplink the interface that carries it, which
	// gets the NodePort programs ("": NodePorts only for the node's pods).
	NodeIP, Uplink string
	Logf           func(string, ...any)
}

// The data planes Run can drive (kube up's --proxy values, named in
// internal/kube/network).
const (
	ModeEBPF = network.VnetlabEBPF
	ModeSock = network.VnetlabSock
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

// byService indexes EndpointSlices by their Service (namespace/name).
const byService = "service"

func sliceService(obj any) ([]string, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	name := es.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return nil, nil
	}
	return []string{es.Namespace + "/" + name}, nil
}

// Run follows the API server and keeps the node's maps in step until ctx
// ends. The maps and programs stay when it returns: a restarted proxy
// picks them up and changes only what changed meanwhile (kube-proxy leaves
// its rules the same way).
func Run(ctx context.Context, c Config) error {
	logf := c.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
	}
	// Informers only watch: the default client rate limit would slow the
	// first listing and every relist after an API server restart.
	rc.QPS, rc.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	planes, err := openPlanes(c, logf)
	if err != nil {
		return err
	}
	defer planes.Close()
	syncer, err := NewSyncer(planes.services)
	if err != nil {
		return err
	}
	logf("maps %s (%s): %d entries from before", planes.dir, c.mode(), syncer.Len())
	nodeIP, err := resolveNodeIP(ctx, cs, c.Node, c.NodeIP)
	if err != nil {
		return err
	}
	switch {
	case c.Uplink != "" && planes.tc == nil:
		// The NodePort programs are the tc plane's; the socket plane's
		// entries for nodeIP:nodePort serve the node's own sockets only.
		logf("NodePorts on %s (%s): for the node's cgroup's sockets only (no program on %s with %s)", nodeIP, c.Node, c.Uplink, ModeSock)
	case c.Uplink != "":
		if _, err := planes.tc.AttachUplink(c.NetNS, c.Uplink); err != nil {
			return err
		}
		logf("NodePorts on %s (%s): programs on %s", nodeIP, c.Node, c.Uplink)
	}
	health := newHealthServers(logf)
	defer health.Close()

	factory := informers.NewSharedInformerFactory(cs, 0)
	svcInf := factory.Core().V1().Services()
	epInf := factory.Discovery().V1().EndpointSlices()
	if err := epInf.Informer().AddIndexers(cache.Indexers{byService: sliceService}); err != nil {
		return err
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer queue.ShutDown()
	enqueue := func(key string) {
		if key != "" {
			queue.Add(key)
		}
	}
	svcKey := func(obj any) {
		k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err == nil {
			enqueue(k)
		}
	}
	sliceKey := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if ks, _ := sliceService(obj); len(ks) == 1 {
			enqueue(ks[0])
		}
	}
	if _, err := svcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: svcKey, UpdateFunc: func(_, n any) { svcKey(n) }, DeleteFunc: svcKey,
	}); err != nil {
		return err
	}
	if _, err := epInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: sliceKey, UpdateFunc: func(_, n any) { sliceKey(n) }, DeleteFunc: sliceKey,
	}); err != nil {
		return err
	}

	how, err := c.PodLinks()
	if err != nil {
		return err
	}
	logf("pods' programs: %s", how)
	linkErr := make(chan error, 1)
	if !c.ByCNI && planes.tc != nil {
		links := &linkWatcher{plane: planes.tc, ns: c.NetNS, bridge: c.Bridge, prefix: c.VethPrefix, logf: logf}
		go func() { linkErr <- links.run(ctx) }()
	}

	start := time.Now()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the informer of %v never synced: %w", typ, ctx.Err())
		}
	}
	sync := func(key string) (Changes, error) {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return Changes{}, nil
		}
		svc, err := svcInf.Lister().Services(ns).Get(name)
		if apierrors.IsNotFound(err) {
			_ = health.Set(key, 0, 0)
			return syncer.Sync(key, nil)
		}
		if err != nil {
			return Changes{}, err
		}
		objs, err := epInf.Informer().GetIndexer().ByIndex(byService, key)
		if err != nil {
			return Changes{}, err
		}
		eps := make([]*discoveryv1.EndpointSlice, 0, len(objs))
		for _, o := range objs {
			eps = append(eps, o.(*discoveryv1.EndpointSlice))
		}
		want, notes := Translate(svc, eps, c.Node)
		np, npNotes := TranslateNodePorts(svc, eps, c.Node, nodeIP)
		for _, n := range append(notes, npNotes...) {
			logf("service %s: %s", key, n)
		}
		if len(np) > 0 && want == nil {
			want = Entries{}
		}
		maps.Copy(want, np)
		ch, err := syncer.SyncWith(key, want, SessionAffinity(svc))
		port, local := HealthCheck(svc, eps, c.Node)
		return ch, errors.Join(err, health.Set(key, port, local))
	}
	// First full sync from the listing, then entries nobody claims go.
	var total Changes
	for _, o := range svcInf.Informer().GetStore().List() {
		k, _ := cache.MetaNamespaceKeyFunc(o)
		ch, err := sync(k)
		total.Add(ch)
		if err != nil {
			logf("service %s: %v", k, err)
		}
	}
	pruned, err := syncer.Prune()
	total.Add(pruned)
	if err != nil {
		logf("prune: %v", err)
	}
	logf("synced %d entries (+%d ~%d -%d) in %s", syncer.Len(), total.Added, total.Updated, total.Deleted, time.Since(start).Round(time.Millisecond))

	go func() {
		select {
		case <-ctx.Done():
		case err := <-linkErr:
			if err != nil {
				logf("link watcher: %v", err)
			}
		}
		queue.ShutDown()
	}()
	for {
		key, quit := queue.Get()
		if quit {
			break
		}
		t0 := time.Now()
		ch, err := sync(key)
		if err != nil {
			logf("service %s: %v (retrying)", key, err)
			queue.AddRateLimited(key)
		} else {
			queue.Forget(key)
		}
		if ch.Total() > 0 {
			logf("service %s: +%d ~%d -%d in %s", key, ch.Added, ch.Updated, ch.Deleted, time.Since(t0).Round(time.Microsecond))
		}
		queue.Done(key)
	}
	if ctx.Err() != nil {
		return nil
	}
	select {
	case err := <-linkErr:
		return err
	default:
		return nil
	}
}

// resolveNodeIP is the node's IPv4 address: given, or the Node object's
// InternalIP (kubelet registers the node a moment after it starts).
func resolveNodeIP(ctx context.Context, cs kubernetes.Interface, node, given string) (netip.Addr, error) {
	if given != "" {
		a, err := netip.ParseAddr(given)
		if err != nil || !a.Is4() {
			return netip.Addr{}, fmt.Errorf("--node-ip %q: want the node's IPv4 address", given)
		}
		return a, nil
	}
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			for _, a := range n.Status.Addresses {
				if ip, perr := netip.ParseAddr(a.Address); a.Type == corev1.NodeInternalIP && perr == nil && ip.Is4() {
					return ip, nil
				}
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return netip.Addr{}, fmt.Errorf("node %s has no IPv4 InternalIP (%v): give it with --node-ip", node, err)
		}
		time.Sleep(time.Second)
	}
}

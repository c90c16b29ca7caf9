package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// ConvergeSpec is one `kube converge`: which cluster, and the changes'
// pace (converge.Pace: how many, the probers' interval, the timeouts).
type ConvergeSpec struct {
	Local, Kubeconfig, Context string // a local cluster's name, or a kubeconfig (and context)
	converge.Pace
	Image string // "": this vnetlab's (loaded into a local cluster)
	// ExtraServices are Services present while the changes are measured,
	// each with ExtraEndpoints endpoints; KeepExtra keeps them for the next
	// run (on this cluster, with as many endpoints each), which reuses them.
	ExtraServices  int
	ExtraEndpoints int
	KeepExtra      bool
	// CRR, when positive, is each tcp_crr sample's length to a Service
	// made after the changes (converge.NewestCRR).
	CRR time.Duration
	// ControllerChanges, when positive, is how many pod label changes
	// time the EndpointSlice controller's share after the changes
	// (convcontroller.go, converge.ControllerChanges).
	ControllerChanges int
	// Policy measures NetworkPolicy changes instead of the Service's
	// (convpolicy.go): a policy admitting the probers into an isolated
	// pod, added and deleted; ExtraPolicies other policies select that
	// pod meanwhile, admitting none of them.
	Policy        bool
	ExtraPolicies int
	// FlowTimeout is the conntrack timeout of the probers' own UDP flows
	// on a local cluster's nodes (converge.LimitFlows); 0: the kernel's.
	FlowTimeout time.Duration
}

// UnknownProxy names a cluster's proxy that detection did not identify.
const UnknownProxy = "unknown proxy"

// DefaultConvergeSpec: converge.DefaultPace, one endpoint per extra Service.
func DefaultConvergeSpec() ConvergeSpec {
	return ConvergeSpec{Pace: converge.DefaultPace(), ExtraEndpoints: 1, ControllerChanges: DefaultControllerChanges, FlowTimeout: converge.DefaultFlowTimeout}
}

// Check refuses a spec that cannot run, in one line naming the flag.
func (s ConvergeSpec) Check() error {
	switch {
	case (s.Local == "") == (s.Kubeconfig == ""):
		return errors.New("give --cluster NAME (a local cluster) or --kubeconfig PATH")
	case s.ExtraServices < 0:
		return fmt.Errorf("--extra-services %d is negative: give how many other Services the cluster holds while changes are measured", s.ExtraServices)
	case s.ExtraEndpoints < 1 || s.ExtraEndpoints > measure.MaxExtraEndpoints:
		return fmt.Errorf("--extra-endpoints %d: use 1 to %d (one EndpointSlice's capacity)", s.ExtraEndpoints, measure.MaxExtraEndpoints)
	case s.ControllerChanges < 0 || s.ControllerChanges > converge.MaxChanges:
		return fmt.Errorf("--controller-changes %d: use 0 (not measured) to %d", s.ControllerChanges, converge.MaxChanges)
	case s.FlowTimeout < 0 || s.FlowTimeout%time.Second != 0:
		return fmt.Errorf("--probe-conntrack-timeout %s: use whole seconds (nft's unit), or 0 for the kernel's", s.FlowTimeout)
	case s.FlowTimeout > 0 && s.FlowTimeout <= s.ProbeTimeout:
		return fmt.Errorf("--probe-conntrack-timeout %s: use more than --probe-timeout (%s), or a probe's entry may end before its answer", s.FlowTimeout, s.ProbeTimeout)
	}
	if err := s.checkPolicy(); err != nil {
		return err
	}
	return s.Pace.Check(s.Kinds())
}

// Kinds are the kinds of change the cycle writes: a policy's and a pod's
// label's with --policy, else a Service's.
func (s ConvergeSpec) Kinds() []string {
	if s.Policy {
		return converge.PolicyLabelKinds
	}
	return converge.ServiceKinds
}

// The probed Service: a selectorless one whose EndpointSlice the run
// writes itself, so that each change is one write.
const (
	convName     = "converge"
	convPort     = 53   // the Service's UDP port
	convMoved    = 54   // the same port after port-changed
	convBackPort = 5353 // the backends' (vnetlab whoami --udp)
	convPortName = "u"
	// The kept connections' port (TCP; vnetlab whoami --tcp-keep).
	convKeepPort     = 80
	convKeepBackPort = 5354
	convKeepName     = "k"
)

// The backends: the Service's first endpoint, and the one added and
// removed (their host names answer the probes).
const (
	backendA = "srv-a"
	backendB = "srv-b"
)

// Converge measures network programming latency on a cluster: a backend
// pair, a prober pod on every Ready node, then spec.Changes changes of the
// probed Service written through the API one at a time, each waited for on
// every node (or spec.ChangeTimeout), with a random pause (spec.PauseMin
// to PauseMax) between them. Everything it created is deleted when it returns, also on
// Ctrl-C (ctx).
func Converge(ctx context.Context, spec ConvergeSpec, say func(string, ...any)) (*results.Convergence, error) {
	if err := spec.Check(); err != nil {
		return nil, err
	}
	var local *clusternet.Network
	var localState *lab.State
	kubeconfig := spec.Kubeconfig
	nodeNS := map[string]string{}
	if spec.Local != "" {
		// Held for the run: no set-proxy or kube down changes the
		// proxy the results name while it measures.
		st, release, err := cluster.Hold(spec.Local)
		if err != nil {
			return nil, err
		}
		defer release()
		localState = st
		n := cluster.Network(st)
		local, kubeconfig = &n, st.Facts[cluster.FactKubeconfig]
		if err := spec.checkEnforcer(st.Name, n.Policy); err != nil {
			return nil, err
		}
		for _, node := range st.Nodes {
			nodeNS[node.Name] = node.NS
		}
		// Its API server and etcd run on this machine: N must fit, said
		// before anything is made.
		if avail, err := memAvailable(); err == nil && spec.ExtraServices > 0 {
			if err := checkFits(spec.ExtraServices, spec.ExtraEndpoints, avail); err != nil {
				return nil, err
			}
		}
	}
	img, pull, err := measuringImage(ctx, spec.Image, spec.Local, say)
	if err != nil {
		return nil, err
	}
	cs, cfg, version, err := measure.ConnectChecked(ctx, kubeconfig, spec.Context)
	if err != nil {
		return nil, err
	}
	ready, err := measure.ReadyNodes(ctx, cs)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, n := range ready {
		nodes = append(nodes, n.Name)
	}
	ns, err := measure.CreateNamespace(ctx, cs)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := measure.DeleteNamespace(cs, ns); err != nil {
			say("warning: deleting namespace %s: %v (run `vnetlab kube clean`)", ns, err)
		}
	}()
	sess := &measure.Session{Client: cs, Config: cfg, Version: version, Nodes: ready, Namespace: ns}
	res := spec.Pace.NewRun()
	facts := sess.Detect(ctx, local)
	if localState != nil {
		facts.ProxySince = localState.Facts[cluster.FactProxySince]
	}
	res.Proxy = facts.KubeProxyMode
	switch {
	case res.Proxy == "":
		res.Proxy = UnknownProxy
		say("converge: the cluster's Service proxy was not identified: measuring anyway (%s)", UnknownProxy)
	case facts.SocketLB:
		res.Proxy += " + socket LB"
	}
	sc := &converge.Scale{Services: spec.ExtraServices, Endpoints: spec.ExtraEndpoints}
	res.Scale = sc
	if spec.Policy {
		policyResult(res, facts.NetworkPolicy, spec, say)
	}
	var meter *usageMeter
	if spec.Local != "" { // its daemons: etcd, the API server, the proxies and the policy controllers
		if meter, err = newUsageMeter(spec.Local); err != nil {
			say("converge: the daemons' use is not measured: %v", err)
		}
	}
	if meter != nil {
		defer meter.stop()
	}
	if spec.Local != "" {
		proxies := cluster.ProxyPIDs(spec.Local)
		defer func() {
			if now := cluster.ProxyPIDs(spec.Local); !maps.Equal(now, proxies) {
				say("converge: warning: cluster %s's node proxies changed during the run (pids %v, now %v): a proxy restarted, its metrics and use are not one process's", spec.Local, proxies, now)
			}
		}()
	}
	cleanup, err := background(ctx, spec, cfg, meter, sc, say)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	c := &converger{spec: spec, cs: cs, ns: ns, exec: &measure.Exec{Client: cs, Config: cfg, Namespace: ns}, say: say, seen: converge.NewSeen(),
		meter: meter, scale: sc, local: spec.Local}
	for _, n := range nodes {
		if nodeNS[n] != "" {
			c.nodeNS = append(c.nodeNS, nodeNS[n])
		}
	}
	defer c.stop()
	if err := c.setUp(ctx, img, pull, nodes); err != nil {
		return nil, err
	}
	res.ProbeConntrackTimeoutS = converge.Seconds(c.flowTimeout)
	var steps []converge.Step
	switch {
	case spec.Policy:
		defer func() {
			if err := measure.DeletePolicies(cfg, ns); err != nil {
				say("warning: deleting the policies of namespace %s: %v", ns, err)
			}
		}()
		if steps, err = c.policySteps(ctx, cfg); err != nil {
			return nil, err
		}
	case len(nodeNS) > 0:
		c.metrics = newScraper(nodeNS)
		c.metrics.baseline(ctx, say)
	default:
		say("converge: not a local cluster: the proxies' own metrics are not scraped")
	}
	if !spec.Policy {
		steps = converge.ServiceSteps(c, c.targets())
	}
	changes, err := converge.CycleSteps(ctx, steps, converge.Hooks{WarmedUp: c.WarmedUp, Observed: c.Observed}, c.seen, spec.Pace, say)
	if err != nil {
		return nil, err
	}
	res.End = time.Now()
	if c.metrics != nil {
		c.metrics.countConntrack()
	}
	c.stop()
	if meter != nil && c.warmed {
		sc.Use = append(sc.Use, meter.end(results.PhaseChanges)...)
		res.OtherWork = meter.other.Result()
	}
	if spec.ControllerChanges > 0 && !spec.Policy {
		say("converge: the EndpointSlice controller's share: %d pod label changes", spec.ControllerChanges)
		// Apart from the changes: a cluster that forbids patching pods
		// (or any other failure here) loses this share, not the run.
		if res.Controller, err = c.controllerShare(ctx, spec.ControllerChanges); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			say("converge: warning: the EndpointSlice controller's share is not measured: %v", err)
		}
	}
	if spec.CRR > 0 {
		if res.CRR, err = c.newestCRR(ctx, spec.CRR); err != nil {
			return nil, err
		}
	}
	converge.Finish(res, changes, c.seen)
	if spec.Policy && spec.ExtraServices == 0 && len(sc.Use) == 0 {
		res.Scale = nil // no background of Services, no daemons measured
	}
	if c.metrics != nil {
		res.ProxySyncs = c.metrics.syncs()
	}
	out := runner.ConvergenceOf(res, say)
	out.Cluster = facts
	if w := slowSyncs(res.ProxySyncs, spec.ChangeTimeout); w != "" {
		say("converge: warning: %s", w)
	}
	return out, nil
}

// converger is one run's state: its pods' processes and what the probers saw.
type converger struct {
	spec    ConvergeSpec
	cs      kubernetes.Interface
	ns      string
	exec    *measure.Exec
	say     func(string, ...any)
	seen    *converge.Seen
	procs   []interface{ Kill() }
	nodes   []string
	ipA     string // the backends' pod IPs
	ipB     string
	vip     string // the probed clusterIP, the same at every creation
	stopMu  sync.Once
	port    int32    // the Service's UDP port now (convPort, or convMoved after port-changed)
	metrics *scraper // a local cluster's proxies' metrics, nil elsewhere
	meter   *usageMeter
	scale   *converge.Scale
	local   string
	warmed  bool
	// nodeNS: a local cluster's nodes' namespaces, where the probers'
	// flows get flowTimeout (converge.LimitFlows) until undoFlows.
	nodeNS      []string
	flowTimeout time.Duration
	undoFlows   func() error
}

// idlePhase is how long the idle phase's use is measured.
const idlePhase = 10 * time.Second

// WarmedUp ends the creation phase (every node carries a Service made
// after the N others), reads the planes' map memory, and measures the
// idle phase before the first change.
func (c *converger) WarmedUp(ctx context.Context) {
	if c.meter == nil {
		return
	}
	c.scale.Use = append(c.scale.Use, c.meter.end(results.PhaseCreate)...)
	if parts, err := cluster.PlaneMapBytes(c.local); err == nil && len(parts) > 0 {
		c.scale.BPFMapParts = parts
		for _, b := range parts {
			c.scale.BPFMapBytes += b
		}
	}
	c.meter.begin()
	select {
	case <-ctx.Done():
	case <-time.After(idlePhase):
	}
	c.scale.Use = append(c.scale.Use, c.meter.end(results.PhaseIdle)...)
	c.meter.begin()
	c.warmed = true
}

// Observed scrapes the proxies' metrics after each change (Change.MetricUS).
func (c *converger) Observed(ctx context.Context, ch *converge.Change) {
	if c.metrics != nil {
		c.metrics.observe(ctx, ch, time.Second)
	}
}

// writesSlice says whether a kind of change is an EndpointSlice write (with
// its trigger time: a proxy's network programming duration starts there);
// the others are writes of the Service.
func writesSlice(kind string) bool {
	return kind == converge.KindEndpointAdded || kind == converge.KindEndpointRemoved
}

// targets are the probed clusterIP's UDP ports.
func (c *converger) targets() converge.Targets {
	a := netip.MustParseAddr(c.vip)
	return converge.Targets{Main: netip.AddrPortFrom(a, convPort).String(), Moved: netip.AddrPortFrom(a, convMoved).String()}
}

// setUp starts the two backends (on the first node and on another, when
// there is one), a prober on every node, and allocates the clusterIP; a
// policy's run, the first backend only (the isolated pod), probed at its
// own address.
func (c *converger) setUp(ctx context.Context, img string, pull corev1.PullPolicy, nodes []string) error {
	c.nodes = nodes
	pods := []measure.PodSpec{{Name: backendA, Node: nodes[0]}, {Name: backendB, Node: nodes[min(1, len(nodes)-1)]}}
	if c.spec.Policy {
		pods = pods[:1]
	}
	for i, n := range nodes {
		pods = append(pods, measure.PodSpec{Name: proberPod(i), Node: n})
	}
	var names []string
	for _, p := range pods {
		if err := measure.CreatePod(ctx, c.cs, c.ns, img, pull, p); err != nil {
			return err
		}
		names = append(names, p.Name)
	}
	what := "2 backends"
	if c.spec.Policy {
		what = "the probed pod"
	}
	c.say("converge: %d pods (%s, a prober on each of %d nodes) in namespace %s", len(pods), what, len(nodes), c.ns)
	ready, err := measure.WaitReady(ctx, c.cs, c.ns, names, img, 0)
	if err != nil {
		return err
	}
	c.ipA = ready[backendA].Status.PodIP
	if err := c.limitFlows(ready, nodes); err != nil {
		return err
	}
	backends := []string{backendA}
	if !c.spec.Policy {
		c.ipB, backends = ready[backendB].Status.PodIP, append(backends, backendB)
	}
	for _, b := range backends {
		p := c.exec.Command(ctx, b, image.VnetlabPath, "whoami", "--udp", strconv.Itoa(convBackPort), "--tcp-keep", strconv.Itoa(convKeepBackPort))
		if err := p.Start(); err != nil {
			return fmt.Errorf("start the backend in %s: %v", b, err)
		}
		c.procs = append(c.procs, p)
	}
	args := []string{"--target", c.policyTarget()}
	if !c.spec.Policy {
		if c.vip, err = c.allocate(ctx); err != nil {
			return err
		}
		t := c.targets()
		args = []string{"--target", t.Main, "--target", t.Moved, "--keep", netip.AddrPortFrom(netip.MustParseAddr(c.vip), convKeepPort).String()}
	}
	for i, n := range nodes {
		p := c.exec.Command(ctx, proberPod(i), image.VnetlabPath, append(append([]string{"kube", "probe", "--node", n}, args...),
			"--interval", c.spec.Interval.String(), "--timeout", c.spec.ProbeTimeout.String())...)
		out, err := p.StdoutPipe()
		if err != nil {
			return err
		}
		if err := p.Start(); err != nil {
			return fmt.Errorf("start the prober on %s: %v", n, err)
		}
		c.procs = append(c.procs, p)
		go c.seen.Read(out)
	}
	// Every prober must report before the first change: its first line.
	if err := c.seen.WaitNodes(ctx, len(nodes), c.spec.ChangeTimeout); err != nil {
		return fmt.Errorf("the probers never reported (%v): is `vnetlab kube probe` in the image?", err)
	}
	return nil
}

func proberPod(i int) string { return "probe-" + strconv.Itoa(i) }

// allocate has the API server choose the clusterIP (a Service created and
// deleted): every creation then asks for it again.
func (c *converger) allocate(ctx context.Context) (string, error) {
	c.port = convPort
	svc, err := c.cs.CoreV1().Services(c.ns).Create(ctx, c.service(""), metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create Service %s: %v", convName, err)
	}
	if err := c.cs.CoreV1().Services(c.ns).Delete(ctx, convName, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	ep := c.slice(time.Now(), c.ipA)
	if _, err := c.cs.DiscoveryV1().EndpointSlices(c.ns).Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create EndpointSlice %s: %v", convName, err)
	}
	return svc.Spec.ClusterIP, nil
}

// service is the probed Service (selectorless: the run writes its slice),
// with its UDP port at c.port and the kept connections' TCP port.
func (c *converger) service(vip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: convName, Labels: map[string]string{measure.LabelKey: measure.LabelValue}},
		Spec: corev1.ServiceSpec{ClusterIP: vip, Ports: []corev1.ServicePort{
			{Name: convPortName, Protocol: corev1.ProtocolUDP, Port: c.port, TargetPort: intstr.FromInt32(convBackPort)},
			{Name: convKeepName, Protocol: corev1.ProtocolTCP, Port: convKeepPort, TargetPort: intstr.FromInt32(convKeepBackPort)}}}}
}

// slice is the Service's EndpointSlice with endpoints at ips, its trigger
// time (the annotation the EndpointSlice controller writes, from which a
// proxy's network programming duration starts) the write's time at.
func (c *converger) slice(at time.Time, ips ...string) *discoveryv1.EndpointSlice {
	u, k, udp, tcp, up, kp := convPortName, convKeepName, corev1.ProtocolUDP, corev1.ProtocolTCP, int32(convBackPort), int32(convKeepBackPort)
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: convName, Labels: map[string]string{discoveryv1.LabelServiceName: convName},
		Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: at.UTC().Format(time.RFC3339Nano)}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &u, Protocol: &udp, Port: &up}, {Name: &k, Protocol: &tcp, Port: &kp}}}
	if strings.Contains(c.ipA, ":") {
		es.AddressType = discoveryv1.AddressTypeIPv6
	}
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return es
}

// Create creates the Service with its clusterIP, retrying while the API
// server still holds the address of the one just deleted; the write's time
// is that of the call that succeeded.
func (c *converger) Create(ctx context.Context) (int64, error) {
	deadline := time.Now().Add(c.spec.ChangeTimeout)
	for {
		at := time.Now().UnixNano()
		_, err := c.cs.CoreV1().Services(c.ns).Create(ctx, c.service(c.vip), metav1.CreateOptions{})
		if err == nil || time.Now().After(deadline) || !(apierrors.IsInvalid(err) || apierrors.IsAlreadyExists(err)) {
			return at, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setSlice writes the slice's endpoints.
func (c *converger) setSlice(ctx context.Context, ips ...string) (int64, error) {
	cur, err := c.cs.DiscoveryV1().EndpointSlices(c.ns).Get(ctx, convName, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	now := time.Now()
	want := c.slice(now, ips...)
	cur.Endpoints, cur.Annotations = want.Endpoints, want.Annotations
	_, err = c.cs.DiscoveryV1().EndpointSlices(c.ns).Update(ctx, cur, metav1.UpdateOptions{})
	return now.UnixNano(), err
}

// AddEndpoint puts the second backend in the slice.
func (c *converger) AddEndpoint(ctx context.Context) (int64, error) {
	return c.setSlice(ctx, c.ipA, c.ipB)
}

// RemoveEndpoint takes it out again.
func (c *converger) RemoveEndpoint(ctx context.Context) (int64, error) { return c.setSlice(ctx, c.ipA) }

// ChangePort moves the Service's UDP port from convPort to convMoved.
func (c *converger) ChangePort(ctx context.Context) (int64, error) {
	cur, err := c.cs.CoreV1().Services(c.ns).Get(ctx, convName, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	c.port = convMoved
	cur.Spec.Ports = c.service(c.vip).Spec.Ports
	at := time.Now().UnixNano()
	_, err = c.cs.CoreV1().Services(c.ns).Update(ctx, cur, metav1.UpdateOptions{})
	return at, err
}

// Delete deletes the Service (its slice stays, for the next creation,
// which has the first port again).
func (c *converger) Delete(ctx context.Context) (int64, error) {
	at := time.Now().UnixNano()
	c.port = convPort
	return at, c.cs.CoreV1().Services(c.ns).Delete(ctx, convName, metav1.DeleteOptions{})
}

// limitFlows gives the probers' flows (the probe pods' addresses, from
// ready) the spec's conntrack timeout on a local cluster's nodes that
// track flows; on another cluster they keep the nodes' own.
func (c *converger) limitFlows(ready map[string]*corev1.Pod, nodes []string) error {
	switch {
	case c.spec.FlowTimeout == 0:
		return nil
	case len(c.nodeNS) == 0:
		c.say("converge: not a local cluster: the probers' flows keep the nodes' conntrack timeouts (a probe a flow: 30 s each for UDP by default)")
		return nil
	}
	var addrs []netip.Addr
	for i := range nodes {
		for _, ip := range ready[proberPod(i)].Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				addrs = append(addrs, a)
			}
		}
	}
	undo, err := converge.LimitFlows(c.nodeNS, addrs, c.spec.FlowTimeout)
	if err != nil {
		return fmt.Errorf("the probers' conntrack timeout on the nodes: %v", err)
	}
	c.undoFlows, c.flowTimeout = undo, c.spec.FlowTimeout
	return nil
}

// Second is the backend added and removed.
func (c *converger) Second() string { return backendB }

// stop ends the backends and probers (their exec streams).
func (c *converger) stop() {
	c.stopMu.Do(func() {
		for _, p := range c.procs {
			p.Kill()
		}
		if c.undoFlows != nil {
			if err := c.undoFlows(); err != nil {
				c.say("warning: %v", err)
			}
		}
	})
}

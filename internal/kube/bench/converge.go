package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sort"
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
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// ConvergeSpec is one `kube converge`: which cluster, how many changes,
// and the probers' pace.
type ConvergeSpec struct {
	Local, Kubeconfig, Context string // a local cluster's name, or a kubeconfig (and context)
	Changes                    int           // changes written, cycling through converge.Kinds
	Interval                   time.Duration // between a prober's probes: the latencies' resolution
	ProbeTimeout               time.Duration // a probe unanswered for this long was silent
	ChangeTimeout              time.Duration // a node that has not shown a change by then did not apply it
	Image                      string        // "": this vnetlab's (loaded into a local cluster)
	// ExtraServices are Services present while the changes are measured
	// (each with one endpoint, as kube run's --extra-services).
	ExtraServices int
}

// Bounds of a ConvergeSpec.
const (
	MinConvergeInterval = 100 * time.Microsecond
	MaxConvergeChanges  = 100000
)

// DefaultConvergeSpec: 200 changes (50 of each kind), a probe every
// millisecond from every node.
func DefaultConvergeSpec() ConvergeSpec {
	return ConvergeSpec{Changes: 200, Interval: time.Millisecond, ProbeTimeout: 100 * time.Millisecond, ChangeTimeout: 10 * time.Second}
}

// Check refuses a spec that cannot run, in one line naming the flag.
func (s ConvergeSpec) Check() error {
	switch {
	case (s.Local == "") == (s.Kubeconfig == ""):
		return errors.New("give --cluster NAME (a local cluster) or --kubeconfig PATH")
	case s.Changes < len(converge.Kinds) || s.Changes > MaxConvergeChanges:
		return fmt.Errorf("--changes %d: use %d to %d (a cycle writes one change of each kind: %s)", s.Changes, len(converge.Kinds), MaxConvergeChanges, strings.Join(converge.Kinds, ", "))
	case s.Interval < MinConvergeInterval:
		return fmt.Errorf("--interval %s: use %s or more (a probe is a socket, a datagram and its answer)", s.Interval, MinConvergeInterval)
	case s.ProbeTimeout < s.Interval:
		return fmt.Errorf("--probe-timeout %s is below --interval %s: a probe must be waited for at least until the next is sent", s.ProbeTimeout, s.Interval)
	case s.ChangeTimeout < 2*s.ProbeTimeout:
		return fmt.Errorf("--change-timeout %s: use at least twice --probe-timeout (%s)", s.ChangeTimeout, 2*s.ProbeTimeout)
	case s.ExtraServices < 0:
		return fmt.Errorf("--extra-services %d is negative: give how many other Services the cluster holds while changes are measured", s.ExtraServices)
	}
	return nil
}

// The probed Service: a selectorless one whose EndpointSlice the run
// writes itself, so that each change is one write.
const (
	convName     = "converge"
	convPort     = 53   // the Service's UDP port
	convBackPort = 5353 // the backends' (vnetlab whoami --udp)
	convPortName = "u"
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
// every node (or spec.ChangeTimeout), with a random pause of 50-250 ms
// between them. Everything it created is deleted when it returns, also on
// Ctrl-C (ctx).
func Converge(ctx context.Context, spec ConvergeSpec, say func(string, ...any)) (*results.Convergence, error) {
	if err := spec.Check(); err != nil {
		return nil, err
	}
	var local *clusternet.Network
	kubeconfig := spec.Kubeconfig
	if spec.Local != "" {
		st, err := cluster.Load(spec.Local)
		if err != nil {
			return nil, err
		}
		n := cluster.Network(st)
		local, kubeconfig = &n, st.Facts[cluster.FactKubeconfig]
	}
	pull := corev1.PullIfNotPresent
	img := spec.Image
	if img == "" {
		var err error
		if img, err = vnetlabImage(ctx, spec.Local, say); err != nil {
			return nil, err
		}
		pull = corev1.PullNever
	}
	cs, cfg, version, err := measure.Connect(ctx, kubeconfig, spec.Context)
	if err != nil {
		return nil, err
	}
	if err := measure.CheckRBAC(ctx, cs); err != nil {
		return nil, err
	}
	nodes, err := readyNodes(ctx, cs)
	if err != nil {
		return nil, err
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
	sess := &measure.Session{Client: cs, Config: cfg, Version: version, Namespace: ns}
	res := &results.Convergence{Cluster: sess.Detect(ctx, local), Start: time.Now(), IntervalUS: spec.Interval.Microseconds()}
	res.Proxy = res.Cluster.KubeProxyMode
	if res.Proxy == "" {
		res.Proxy = "unknown proxy"
	}
	if spec.ExtraServices > 0 {
		extra, err := measure.CreateExtraServices(ctx, cfg, spec.ExtraServices, say)
		if err != nil {
			return nil, err
		}
		say("converge: %d extra Services in %s (%.0f/s)", extra.Count, extra.Took.Round(time.Second), extra.Rate())
		defer func() {
			if _, err := extra.Delete(say); err != nil {
				say("warning: deleting the extra Services: %v (run `vnetlab kube clean`)", err)
			}
		}()
	}
	c := &converger{spec: spec, cs: cs, ns: ns, exec: &measure.Exec{Client: cs, Config: cfg, Namespace: ns}, say: say, seen: newTransitions()}
	if err := c.setUp(ctx, img, pull, nodes); err != nil {
		return nil, err
	}
	defer c.stop()
	if err := c.warmUp(ctx); err != nil {
		return nil, err
	}
	res.Start = time.Now()
	if err := c.cycle(ctx, res); err != nil {
		return nil, err
	}
	res.End = time.Now()
	c.stop()
	seen := c.seen.all()
	res.Rows = converge.Summarize(res.Changes, seen, res.End.UnixNano())
	for _, n := range slices.Sorted(maps.Keys(seen)) {
		res.Transitions = append(res.Transitions, seen[n]...)
	}
	return res, nil
}

// readyNodes are the cluster's Ready schedulable nodes, by name.
func readyNodes(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %v", err)
	}
	var out []string
	for _, n := range list.Items {
		ready := slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		if ready && !n.Spec.Unschedulable {
			out = append(out, n.Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no Ready schedulable node among the cluster's %d: wait until they are Ready (kubectl get nodes)", len(list.Items))
	}
	slices.Sort(out)
	return out, nil
}

// converger is one run's state: its pods' processes and what the probers saw.
type converger struct {
	spec   ConvergeSpec
	cs     kubernetes.Interface
	ns     string
	exec   *measure.Exec
	say    func(string, ...any)
	seen   *transitions
	procs  []interface{ Kill() }
	nodes  []string
	ipA    string // the backends' pod IPs
	ipB    string
	vip    string // the probed clusterIP, the same at every creation
	stopMu sync.Once
}

// setUp starts the two backends (on the first node and on another, when
// there is one), a prober on every node, and allocates the clusterIP.
func (c *converger) setUp(ctx context.Context, img string, pull corev1.PullPolicy, nodes []string) error {
	c.nodes = nodes
	pods := []measure.PodSpec{{Name: backendA, Node: nodes[0]}, {Name: backendB, Node: nodes[min(1, len(nodes)-1)]}}
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
	c.say("converge: %d pods (2 backends, a prober on each of %d nodes) in namespace %s", len(pods), len(nodes), c.ns)
	ready, err := measure.WaitReady(ctx, c.cs, c.ns, names, img, 0)
	if err != nil {
		return err
	}
	c.ipA, c.ipB = ready[backendA].Status.PodIP, ready[backendB].Status.PodIP
	for _, b := range []string{backendA, backendB} {
		p := c.exec.Command(ctx, b, image.VnetlabPath, "whoami", "--udp", strconv.Itoa(convBackPort))
		if err := p.Start(); err != nil {
			return fmt.Errorf("start the backend in %s: %v", b, err)
		}
		c.procs = append(c.procs, p)
	}
	if c.vip, err = c.allocate(ctx); err != nil {
		return err
	}
	target := netip.AddrPortFrom(netip.MustParseAddr(c.vip), convPort).String()
	for i, n := range nodes {
		p := c.exec.Command(ctx, proberPod(i), image.VnetlabPath, "kube", "probe", "--node", n, "--target", target,
			"--interval", c.spec.Interval.String(), "--timeout", c.spec.ProbeTimeout.String())
		out, err := p.StdoutPipe()
		if err != nil {
			return err
		}
		if err := p.Start(); err != nil {
			return fmt.Errorf("start the prober on %s: %v", n, err)
		}
		c.procs = append(c.procs, p)
		go c.seen.read(out)
	}
	// Every prober must report before the first change: its first line.
	return c.waitUntil(ctx, c.spec.ChangeTimeout, func() bool { return len(c.seen.all()) == len(nodes) },
		"the probers never reported (is `vnetlab kube probe` in the image?)")
}

func proberPod(i int) string { return "probe-" + strconv.Itoa(i) }

// allocate has the API server choose the clusterIP (a Service created and
// deleted): every creation then asks for it again.
func (c *converger) allocate(ctx context.Context) (string, error) {
	svc, err := c.cs.CoreV1().Services(c.ns).Create(ctx, c.service(""), metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create Service %s: %v", convName, err)
	}
	if err := c.cs.CoreV1().Services(c.ns).Delete(ctx, convName, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	ep := c.slice(c.ipA)
	if _, err := c.cs.DiscoveryV1().EndpointSlices(c.ns).Create(ctx, ep, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create EndpointSlice %s: %v", convName, err)
	}
	return svc.Spec.ClusterIP, nil
}

// service is the probed Service (selectorless: the run writes its slice).
func (c *converger) service(vip string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: convName, Labels: map[string]string{measure.LabelKey: measure.LabelValue}},
		Spec: corev1.ServiceSpec{ClusterIP: vip, Ports: []corev1.ServicePort{{Name: convPortName, Protocol: corev1.ProtocolUDP, Port: convPort, TargetPort: intstr.FromInt32(convBackPort)}}}}
}

// slice is the Service's EndpointSlice with endpoints at ips.
func (c *converger) slice(ips ...string) *discoveryv1.EndpointSlice {
	name, proto, port := convPortName, corev1.ProtocolUDP, int32(convBackPort)
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: convName, Labels: map[string]string{discoveryv1.LabelServiceName: convName}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}}}
	if strings.Contains(c.ipA, ":") {
		es.AddressType = discoveryv1.AddressTypeIPv6
	}
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return es
}

// warmUpTimeout bounds the unmeasured first creation and deletion: after
// many extra Services the EndpointSlice controller and the proxies may
// still be working through them (about 19 s after 1,000 on a local cluster).
const warmUpTimeout = 10 * time.Minute

// warmUp creates and deletes the Service once, unmeasured, waiting until
// every node has followed each: what the cluster still owed earlier writes
// is not charged to the first measured change.
func (c *converger) warmUp(ctx context.Context) error {
	start := time.Now()
	for _, step := range []struct {
		shows string
		write func() (int64, error)
	}{
		{converge.ShowsAny, func() (int64, error) { return c.create(ctx) }},
		{converge.ShowsNone, func() (int64, error) {
			at := time.Now().UnixNano()
			return at, c.cs.CoreV1().Services(c.ns).Delete(ctx, convName, metav1.DeleteOptions{})
		}},
	} {
		at, err := step.write()
		if err != nil {
			return fmt.Errorf("warm-up: %v", err)
		}
		ch := results.Change{Shows: step.shows, Written: at}
		err = c.waitUntil(ctx, warmUpTimeout, func() bool { return c.shownEverywhere(ch, 0) },
			"the nodes never followed the warm-up's change of Service "+convName+": is the cluster's Service proxy running?")
		if err != nil {
			return err
		}
	}
	c.say("converge: warm-up done in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// cycle writes the changes, one kind after the other, each waited for.
func (c *converger) cycle(ctx context.Context, res *results.Convergence) error {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 47))
	target := netip.AddrPortFrom(netip.MustParseAddr(c.vip), convPort).String()
	for i := range c.spec.Changes {
		kind := converge.Kinds[i%len(converge.Kinds)]
		ch := results.Change{Seq: i, Kind: kind, Target: target}
		var err error
		switch kind {
		case converge.KindServiceCreated:
			ch.Shows = converge.ShowsAny
			ch.Written, err = c.create(ctx)
		case converge.KindEndpointAdded:
			ch.Shows = backendB
			ch.Written, err = c.setSlice(ctx, c.ipA, c.ipB)
		case converge.KindEndpointRemoved:
			ch.Shows = converge.Gone(backendB)
			ch.Written, err = c.setSlice(ctx, c.ipA)
		case converge.KindServiceDeleted:
			ch.Shows = converge.ShowsNone
			ch.Written = time.Now().UnixNano()
			err = c.cs.CoreV1().Services(c.ns).Delete(ctx, convName, metav1.DeleteOptions{})
		}
		if err != nil {
			return fmt.Errorf("change %d (%s): %v", i, kind, err)
		}
		res.Changes = append(res.Changes, ch)
		c.waitApplied(ctx, ch)
		if (i+1)%20 == 0 {
			c.say("converge: %d/%d changes", i+1, c.spec.Changes)
		}
		pause := 50*time.Millisecond + time.Duration(r.Int64N(int64(200*time.Millisecond)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
	return nil
}

// create creates the Service with its clusterIP, retrying while the API
// server still holds the address of the one just deleted; the write's time
// is that of the call that succeeded.
func (c *converger) create(ctx context.Context) (int64, error) {
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
	cur.Endpoints = c.slice(ips...).Endpoints
	at := time.Now().UnixNano()
	_, err = c.cs.DiscoveryV1().EndpointSlices(c.ns).Update(ctx, cur, metav1.UpdateOptions{})
	return at, err
}

// waitApplied waits until every node shows ch, or spec.ChangeTimeout. A
// removed backend's change shows at the end of its last answers, so that
// end must be two probe timeouts old: a later answer from it would move it.
func (c *converger) waitApplied(ctx context.Context, ch results.Change) {
	settle := 2 * c.spec.ProbeTimeout
	_ = c.waitUntil(ctx, c.spec.ChangeTimeout, func() bool { return c.shownEverywhere(ch, settle) }, "")
}

// shownEverywhere says whether every node shows ch (a removed backend's,
// with the end of its answers settle old).
func (c *converger) shownEverywhere(ch results.Change, settle time.Duration) bool {
	_, leaving := converge.GoneOf(ch.Shows)
	now := time.Now().UnixNano()
	for _, ts := range c.seen.since(ch.Written) {
		d, ok := converge.Latency(ch, ts, now)
		if !ok || leaving && ch.Written+int64(d+settle) > now {
			return false
		}
	}
	return true
}

// waitUntil polls ok every millisecond until it holds, limit passes (an
// error when why is set) or ctx ends.
func (c *converger) waitUntil(ctx context.Context, limit time.Duration, ok func() bool, why string) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			if why == "" {
				return nil
			}
			return fmt.Errorf("after %s: %s", limit, why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// stop ends the backends and probers (their exec streams).
func (c *converger) stop() {
	c.stopMu.Do(func() {
		for _, p := range c.procs {
			p.Kill()
		}
	})
}

// transitions are what the probers printed, by node.
type transitions struct {
	mu     sync.Mutex
	byNode map[string][]results.Transition
}

func newTransitions() *transitions {
	return &transitions{byNode: map[string][]results.Transition{}}
}

// read takes a prober's lines until its stream ends.
func (t *transitions) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var tr results.Transition
		if json.Unmarshal(sc.Bytes(), &tr) != nil {
			continue
		}
		t.mu.Lock()
		t.byNode[tr.Node] = append(t.byNode[tr.Node], tr)
		t.mu.Unlock()
	}
}

// since is, for every node, its transitions from the last one before w
// (the state at w) on: what a change written at w is judged on.
func (t *transitions) since(w int64) map[string][]results.Transition {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string][]results.Transition, len(t.byNode))
	for n, ts := range t.byNode {
		i := sort.Search(len(ts), func(i int) bool { return ts[i].Sent >= w })
		out[n] = slices.Clone(ts[max(i-1, 0):])
	}
	return out
}

// all is a copy of every node's transitions, each in send order.
func (t *transitions) all() map[string][]results.Transition {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string][]results.Transition, len(t.byNode))
	for n, ts := range t.byNode {
		out[n] = slices.Clone(ts)
	}
	return out
}

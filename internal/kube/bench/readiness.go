package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/measure/readiness"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// ReadinessSpec is what `kube readiness` measures: bursts of new pods, each
// burst's pods created at once, every size in every cluster once per round,
// Repeat rounds.
type ReadinessSpec struct {
	// Local are local clusters, measured side by side (the first is the
	// comparisons' base); none: the cluster of Kubeconfig and Context.
	Local               []string
	Kubeconfig, Context string
	Image               string // "": this vnetlab's (loaded into a local cluster)
	Bursts              []int
	Repeat              int
	// Timeout is how long a burst's pods may take to be created and to
	// send their first packet (and, after it, to be gone).
	Timeout time.Duration
	// Every is how often a new pod sends until answered: the resolution.
	Every time.Duration
}

// The bounds of a readiness run.
const (
	MaxBurst  = 500
	MaxRounds = 100
)

// DefaultReadinessSpec is one pod and 50 at once, in the fewest rounds a
// paired comparison has an interval from.
func DefaultReadinessSpec() ReadinessSpec {
	return ReadinessSpec{Bursts: []int{1, 50}, Repeat: analysis.MinPairs, Timeout: 3 * time.Minute, Every: time.Millisecond}
}

// Check refuses a spec before the cluster is touched.
func (s ReadinessSpec) Check() error {
	if len(s.Local) > 0 && (s.Kubeconfig != "" || s.Context != "") {
		return errors.New("give either --cluster or --kubeconfig/--context, not both")
	}
	for i, c := range s.Local {
		if c == "" || slices.Contains(s.Local[:i], c) {
			return field.Errorf("cluster", "{cluster} %q: name each local cluster once, comma-separated", strings.Join(s.Local, ","))
		}
	}
	if len(s.Bursts) == 0 {
		return field.Errorf("pods", "give at least one burst size with {pods}, e.g. 1,50")
	}
	for _, b := range s.Bursts {
		if b < 1 || b > MaxBurst {
			return field.Errorf("pods", "{pods} %d is out of range: each burst is 1 to %d pods", b, MaxBurst)
		}
	}
	if s.Repeat < 1 || s.Repeat > MaxRounds {
		return field.Errorf("repeat", "{repeat} %d is out of range: 1 to %d rounds", s.Repeat, MaxRounds)
	}
	if s.Timeout < time.Second {
		return field.Errorf("timeout", "{timeout} %s is too short: give 1s or more (the default is 3m)", s.Timeout)
	}
	if s.Every < 100*time.Microsecond || s.Every > time.Second {
		return field.Errorf("interval", "{interval} %s is out of range: 100us to 1s", s.Every)
	}
	return nil
}

// readyListener is the pod the new pods send to.
const readyListener = "listener"

// MeasureReadiness runs spec: in each cluster a listener pod, Ready first,
// and an unmeasured pod per node; then per round each burst size in each
// cluster (their order turned by one each round): the burst's pods created
// at once, spread over the Ready nodes (their node named in the pod: the
// scheduler is not measured), each sending until answered; a burst's pods
// are deleted, and gone, before the next burst.
func MeasureReadiness(ctx context.Context, spec ReadinessSpec, say func(string, ...any)) (*results.ReadinessRun, error) {
	if err := spec.Check(); err != nil {
		return nil, err
	}
	targets := spec.Local
	if len(targets) == 0 {
		targets = []string{""}
	}
	var rs []*readier
	defer func() {
		for _, r := range rs {
			r.close()
		}
	}()
	for _, local := range targets {
		r, err := newReadier(ctx, spec, local, say)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	run := &results.ReadinessRun{LoadBefore: cpu.LoadAvg(), IntervalUS: float64(spec.Every) / float64(time.Microsecond)}
	for _, r := range rs {
		say("readiness: %s: a first pod on each of %d nodes, not measured", r.name, len(r.nodes))
		if _, err := r.burst(ctx, "warm", len(r.nodes)); err != nil {
			return nil, err
		}
		out := results.Readiness{Name: r.name, Cluster: r.facts}
		for _, b := range spec.Bursts {
			out.Bursts = append(out.Bursts, results.Burst{Pods: b})
		}
		run.Clusters = append(run.Clusters, out)
	}
	for round := range spec.Repeat {
		for i, b := range spec.Bursts {
			for k := range rs {
				c := (k + round) % len(rs)
				rd, err := rs[c].burst(ctx, fmt.Sprintf("r%d-b%d", round, b), b)
				if err != nil {
					return nil, err
				}
				say("readiness: round %d/%d, %s, a burst of %d: first packet p50 %.0f ms, last pod %.0f ms",
					round+1, spec.Repeat, rs[c].name, b, stats.Median(rd.FirstPacketUS)/1000, rd.LastUS/1000)
				run.Clusters[c].Bursts[i].Rounds = append(run.Clusters[c].Bursts[i].Rounds, rd)
			}
		}
	}
	analysis.Readiness(run)
	run.LoadAfter = cpu.LoadAvg()
	return run, nil
}

// readier holds a run's side in one cluster.
type readier struct {
	spec   ReadinessSpec
	name   string
	facts  *results.Cluster
	cs     kubernetes.Interface
	create kubernetes.Interface // unthrottled, for a burst's creations
	ns     string
	img    string
	pull   corev1.PullPolicy
	nodes  []string
	say    func(string, ...any)
	target netip.AddrPort
	stop   func() // ends the listener

	mu      sync.Mutex
	arrived map[string]int64 // pod -> its first datagram (Unix ns)
	wake    chan struct{}
}

// newReadier connects to a cluster (local: a local cluster's name; "":
// spec's kubeconfig), makes the run's namespace and its listener.
func newReadier(ctx context.Context, spec ReadinessSpec, local string, say func(string, ...any)) (r *readier, err error) {
	kubeconfig, name := spec.Kubeconfig, local
	var network *clusternet.Network
	if local != "" {
		st, err := cluster.Load(local)
		if err != nil {
			return nil, err
		}
		n := cluster.Network(st)
		network, kubeconfig = &n, st.Facts[cluster.FactKubeconfig]
	}
	img, pull, err := measuringImage(ctx, spec.Image, local, say)
	if err != nil {
		return nil, err
	}
	cs, cfg, version, err := measure.ConnectChecked(ctx, kubeconfig, spec.Context)
	if err != nil {
		return nil, err
	}
	nodes, err := measure.ReadyNodes(ctx, cs)
	if err != nil {
		return nil, err
	}
	ns, err := measure.CreateNamespace(ctx, cs)
	if err != nil {
		return nil, err
	}
	r = &readier{spec: spec, name: name, cs: cs, ns: ns, img: img, pull: pull, say: say, arrived: map[string]int64{}, wake: make(chan struct{}, 1)}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.name == "" {
		r.name = cfg.Host
	}
	for _, n := range nodes {
		r.nodes = append(r.nodes, n.Name)
	}
	sess := &measure.Session{Client: cs, Config: cfg, Version: version, Nodes: nodes, Namespace: ns,
		Exec: &measure.Exec{Client: cs, Config: cfg, Namespace: ns}}
	r.facts = sess.Detect(ctx, network)
	// Creations unthrottled on the client: a burst is its pods at once.
	fast := *cfg
	fast.QPS, fast.Burst = -1, 0
	if r.create, err = kubernetes.NewForConfig(&fast); err != nil {
		return nil, err
	}
	return r, r.listen(ctx, sess)
}

// close ends the listener and deletes the namespace.
func (r *readier) close() {
	if r.stop != nil {
		r.stop()
	}
	if err := measure.DeleteNamespace(r.cs, r.ns); err != nil {
		r.say("warning: deleting namespace %s in %s: %v (run `vnetlab kube clean`)", r.ns, r.name, err)
	}
}

// listen makes the listener pod, starts `kube hello-listen` in it and
// waits for its first line.
func (r *readier) listen(ctx context.Context, sess *measure.Session) error {
	if err := measure.CreatePod(ctx, r.cs, r.ns, r.img, r.pull, measure.PodSpec{Name: readyListener, Node: r.nodes[0]}); err != nil {
		return err
	}
	ready, err := measure.WaitReady(ctx, r.cs, r.ns, []string{readyListener}, r.img, 0)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(ready[readyListener].Status.PodIP)
	if err != nil {
		return fmt.Errorf("the listener pod's IP %q: %v", ready[readyListener].Status.PodIP, err)
	}
	r.target = netip.AddrPortFrom(ip, readiness.Port)
	p := sess.Exec.Command(ctx, readyListener, image.VnetlabPath, "kube", "hello-listen", "--port", strconv.Itoa(readiness.Port))
	pipe, err := p.StdoutPipe()
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return fmt.Errorf("start the listener: %v", err)
	}
	listening := make(chan struct{})
	go r.read(pipe, listening)
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		p.Kill()
		return fmt.Errorf("the listener in pod %s never said it listens: is `vnetlab kube hello-listen` in the image %s?", readyListener, r.img)
	}
	r.stop = p.Kill
	return nil
}

// read takes the listener's lines: the first closes listening, each
// arrival is kept by pod name.
func (r *readier) read(pipe io.Reader, listening chan struct{}) {
	sc := bufio.NewScanner(pipe)
	once := sync.OnceFunc(func() { close(listening) })
	for sc.Scan() {
		var l readiness.Line
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		if l.Listening != "" {
			once()
		}
		if l.Arrival != nil {
			r.mu.Lock()
			r.arrived[l.Name] = l.AtNS
			r.mu.Unlock()
			select {
			case r.wake <- struct{}{}:
			default:
			}
		}
	}
}

// burst creates n pods at once, waits for each one's first packet, then
// deletes them and waits until they are gone.
func (r *readier) burst(ctx context.Context, tag string, n int) (results.Round, error) {
	names := make([]string, n)
	created := make([]time.Time, n)
	errs := make([]error, n)
	// A creation is part of what is measured: it may take the burst's
	// timeout on a busy API server.
	cctx, cancel := context.WithTimeout(ctx, r.spec.Timeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		names[i] = "pod-" + tag + "-" + strconv.Itoa(i)
		wg.Go(func() {
			cmd := []string{image.VnetlabPath, "kube", "hello", "--to", r.target.String(), "--name", names[i], "--interval", r.spec.Every.String()}
			pod := measure.Pod(r.img, r.pull, measure.PodSpec{Name: names[i], Node: r.nodes[i%len(r.nodes)], Command: cmd})
			created[i] = time.Now()
			if _, err := r.create.CoreV1().Pods(r.ns).Create(cctx, pod, metav1.CreateOptions{}); err != nil {
				errs[i] = fmt.Errorf("create pod %s: %v", names[i], err)
			}
		})
	}
	wg.Wait()
	defer r.remove(names)
	for _, err := range errs {
		if err != nil {
			return results.Round{}, err
		}
	}
	deadline := time.NewTimer(r.spec.Timeout)
	defer deadline.Stop()
	for {
		rd, missing := r.round(names, created)
		if len(missing) == 0 {
			return rd, nil
		}
		select {
		case <-ctx.Done():
			return results.Round{}, ctx.Err()
		case <-deadline.C:
			return results.Round{}, r.silent(ctx, missing)
		case <-r.wake:
		case <-time.After(time.Second):
		}
	}
}

// round is the round's times so far, and the pods not heard from yet.
func (r *readier) round(names []string, created []time.Time) (results.Round, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var rd results.Round
	var missing []string
	first := slices.MinFunc(created, time.Time.Compare)
	for i, name := range names {
		at, ok := r.arrived[name]
		if !ok {
			missing = append(missing, name)
			continue
		}
		rd.FirstPacketUS = append(rd.FirstPacketUS, float64(at-created[i].UnixNano())/1e3)
		rd.LastUS = max(rd.LastUS, float64(at-first.UnixNano())/1e3)
	}
	return rd, missing
}

// silent is the one-line error for pods that sent nothing in time.
func (r *readier) silent(ctx context.Context, missing []string) error {
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := r.cs.CoreV1().Pods(r.ns).Get(gctx, missing[0], metav1.GetOptions{})
	if err != nil {
		p = nil
	}
	where := ""
	if p != nil {
		where = " on " + p.Spec.NodeName
	}
	return fmt.Errorf("%d of the burst's pods sent no packet to %s within %s, first %s%s: %s: check the node's CNI (kubectl -n %s describe pod %s), or wait longer with --timeout",
		len(missing), r.target, r.spec.Timeout, missing[0], where, measure.PodState(r.cs, r.ns, p), r.ns, missing[0])
}

// remove deletes the pods at once and waits until none is left, so that
// their teardown is not inside the next burst.
func (r *readier) remove(names []string) {
	zero := int64(0)
	for _, name := range names {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r.create.CoreV1().Pods(r.ns).Delete(dctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		cancel()
	}
	deadline := time.Now().Add(r.spec.Timeout)
	for time.Now().Before(deadline) {
		lctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		list, err := r.cs.CoreV1().Pods(r.ns).List(lctx, metav1.ListOptions{})
		cancel()
		if err == nil && !slices.ContainsFunc(list.Items, func(p corev1.Pod) bool { return slices.Contains(names, p.Name) }) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.say("warning: %d pods of a burst were not gone after %s; the next burst runs beside their teardown", len(names), r.spec.Timeout)
}

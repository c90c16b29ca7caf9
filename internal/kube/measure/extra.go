package measure

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
)

// ExtraWorkers is how many API calls the extra Services are created and
// deleted with at once: enough to keep a local API server busy, few enough
// not to trip its max-in-flight limits.
const ExtraWorkers = 32

// extraEndpointNet holds the extra Services' endpoints: one address each
// from the benchmarking range (RFC 2544), which no pod or node has, so a
// proxy programs a real backend and no packet is ever sent there.
var extraEndpointNet = netip.MustParseAddr("198.18.0.1")

// MaxExtraEndpoints is the most endpoints an extra Service has: one
// EndpointSlice's default capacity (the EndpointSlice controller's
// --max-endpoints-per-slice).
const MaxExtraEndpoints = 100

// ExtraKeptLabel marks a namespace of extra Services kept for the next run
// (KeptExtraServices); its value is their endpoints per Service.
const ExtraKeptLabel = "vnetlab.io/extra-endpoints"

// Extra is a namespace of extra Services made by CreateExtraServices or
// KeptExtraServices.
type Extra struct {
	cs        kubernetes.Interface
	Namespace string
	Count     int
	Endpoints int // per Service
	Reused    int // of Count, already there (a kept namespace)
	Took      time.Duration
}

// Rate is Services per second (each with its EndpointSlice).
func (e *Extra) Rate() float64 { return float64(e.Count) / e.Took.Seconds() }

// extraClient is a client for bulk work: the default client-go rate limit
// (5 requests/s, burst 10) would make 10k Services take over an hour. It
// speaks protobuf, as Kubernetes' own components do: JSON's encoding and
// decoding cost the API server and the client more CPU per object.
func extraClient(cfg *rest.Config) (*kubernetes.Clientset, error) { return bulkClient(cfg, apiTimeout) }

// bulkClient is extraClient with each request's timeout.
func bulkClient(cfg *rest.Config, timeout time.Duration) (*kubernetes.Clientset, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = -1, 0 // no client-side limit; the server's flow control still applies
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.Timeout = timeout
	return kubernetes.NewForConfig(c)
}

// servicesClient is the bulk client for n extra Services, once the
// cluster's Service range is known to hold them (CheckServiceRange).
func servicesClient(ctx context.Context, cfg *rest.Config, n int) (*kubernetes.Clientset, error) {
	cs, err := extraClient(cfg)
	if err != nil {
		return nil, err
	}
	return cs, CheckServiceRange(ctx, cs, n)
}

// CreateExtraServices creates n ClusterIP Services in a labelled namespace
// of their own, each selector-less with one EndpointSlice holding eps
// ready endpoints (what a proxy programs as a Service with backends, like
// the measured one), with ExtraWorkers calls at once. say reports progress
// every few seconds. On failure what was made is deleted.
func CreateExtraServices(ctx context.Context, cfg *rest.Config, n, eps int, say func(string, ...any)) (*Extra, error) {
	cs, err := servicesClient(ctx, cfg, n)
	if err != nil {
		return nil, err
	}
	ns, err := CreateNamespace(ctx, cs)
	if err != nil {
		return nil, err
	}
	e := &Extra{cs: cs, Namespace: ns, Count: n, Endpoints: max(eps, 1)}
	if err := e.fill(ctx, map[int]bool{}, say); err != nil {
		e.Delete(say)
		return nil, fmt.Errorf("creating %d extra Services: %v", n, err)
	}
	return e, nil
}

// KeptExtraServices makes n extra Services with eps endpoints each in the
// namespace kept for eps endpoints (ExtraKeptLabel; made when there is
// none), creating only those missing and deleting those beyond n (and a
// kept set of another eps: one at a time): a sweep of growing counts, or a
// second run, reuses what the last one made. The
// namespace stays after the run (Extra.Delete, or `vnetlab kube clean`,
// removes it). On failure what it holds is left for the next run.
func KeptExtraServices(ctx context.Context, cfg *rest.Config, n, eps int, say func(string, ...any)) (*Extra, error) {
	cs, err := servicesClient(ctx, cfg, n)
	if err != nil {
		return nil, err
	}
	sel := fmt.Sprintf("%s=%s,%s", LabelKey, LabelValue, ExtraKeptLabel)
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list kept extra Services' namespaces: %v", err)
	}
	e := &Extra{cs: cs, Count: n, Endpoints: eps}
	for _, ns := range list.Items {
		switch {
		case ns.DeletionTimestamp != nil:
		case ns.Labels[ExtraKeptLabel] == fmt.Sprint(eps) && e.Namespace == "":
			e.Namespace = ns.Name
		default:
			// One kept set at a time: the cluster holds n other Services,
			// not those of another E too.
			say("extra Services: deleting the kept set of namespace %s (%s endpoints each)", ns.Name, ns.Labels[ExtraKeptLabel])
			if _, err := (&Extra{cs: cs, Namespace: ns.Name}).Delete(say); err != nil {
				return nil, fmt.Errorf("deleting the kept extra Services of namespace %s: %v", ns.Name, err)
			}
		}
	}
	have := map[int]bool{}
	if e.Namespace == "" {
		if e.Namespace, err = CreateNamespace(ctx, cs); err != nil {
			return nil, err
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, e.Namespace, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		ns.Labels[ExtraKeptLabel] = fmt.Sprint(eps)
		if _, err := cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("label namespace %s as kept: %v", e.Namespace, err)
		}
	} else if have, err = e.existing(ctx); err != nil {
		return nil, err
	}
	var beyond []int
	for i := range have {
		if i >= n {
			beyond = append(beyond, i)
		} else {
			e.Reused++
		}
	}
	if len(beyond) > 0 {
		say("extra Services: deleting %d of the kept %d beyond %d", len(beyond), len(have), n)
		if err := parallel(ctx, len(beyond), func(k int) error {
			name := extraName(beyond[k])
			_, err := retryAPI(ctx, func(c context.Context) error {
				err := cs.CoreV1().Services(e.Namespace).Delete(c, name, metav1.DeleteOptions{})
				if err == nil || apierrors.IsNotFound(err) {
					err = cs.DiscoveryV1().EndpointSlices(e.Namespace).Delete(c, name, metav1.DeleteOptions{})
				}
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			})
			return err
		}); err != nil {
			return nil, fmt.Errorf("deleting kept extra Services beyond %d: %v", n, err)
		}
	}
	if e.Reused > 0 {
		say("extra Services: reusing %d kept in namespace %s", e.Reused, e.Namespace)
	}
	if err := e.fill(ctx, have, say); err != nil {
		return nil, fmt.Errorf("creating %d extra Services: %v (those made are kept in namespace %s)", n, err, e.Namespace)
	}
	return e, nil
}

// existing lists the indexes of the extra Services e's namespace holds.
func (e *Extra) existing(ctx context.Context) (map[int]bool, error) {
	have := map[int]bool{}
	opts := metav1.ListOptions{Limit: 5000}
	for {
		list, err := e.cs.CoreV1().Services(e.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list the kept extra Services: %v", err)
		}
		for _, s := range list.Items {
			var i int
			if _, err := fmt.Sscanf(s.Name, "extra-%d", &i); err == nil {
				have[i] = true
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return have, nil
		}
	}
}

// fill creates the extra Services below e.Count that have lacks.
func (e *Extra) fill(ctx context.Context, have map[int]bool, say func(string, ...any)) error {
	var todo []int
	for i := range e.Count {
		if !have[i] {
			todo = append(todo, i)
		}
	}
	start := time.Now()
	var done atomic.Int64
	last, lastAt := int64(0), start
	var eta growingETA
	present := float64(e.Count - len(todo))
	stop := progressEvery(5*time.Second, func() {
		// The rate falls as the cluster fills: the time left is from a
		// time per Service that grows with the count (growingETA).
		n, now := done.Load(), time.Now()
		rate := float64(n-last) / now.Sub(lastAt).Seconds()
		mid := present + float64(n+last)/2
		last, lastAt = n, now
		left := "?"
		if d := eta.left(mid, float64(e.Count), 1/rate); d > 0 {
			left = d.Round(time.Second).String()
		}
		say("extra Services: %d/%d created (%.0f/s; %.0f/s now, about %s left as the rate keeps falling)", n, len(todo), float64(n)/now.Sub(start).Seconds(), rate, left)
	})
	err := parallel(ctx, len(todo), func(k int) error {
		if err := createExtra(ctx, e.cs, e.Namespace, todo[k], e.Endpoints); err != nil {
			return err
		}
		done.Add(1)
		return nil
	})
	stop()
	e.Took = time.Since(start)
	return err
}

func extraName(i int) string { return fmt.Sprintf("extra-%05d", i) }

// extraEndpoints is how many addresses the extra endpoints cycle through:
// 198.18.0.0/15 (beyond, Services share addresses: a proxy programs each
// Service's backends all the same).
const extraEndpoints = 1 << 17

func createExtra(ctx context.Context, cs kubernetes.Interface, ns string, i, n int) error {
	name := extraName(i)
	labels := map[string]string{LabelKey: LabelValue}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if _, err := retryAPI(ctx, func(c context.Context) error {
		_, err := cs.CoreV1().Services(ns).Create(c, svc, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("service %s: %v", name, err)
	}
	b := extraEndpointNet.As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	ready, port, proto, portName := true, int32(8080), corev1.ProtocolTCP, "tcp"
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelKey: LabelValue,
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "vnetlab"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
	}
	n = max(n, 1)
	for j := range n {
		v := base + uint32((i*n+j)%extraEndpoints)
		addr := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		eps.Endpoints = append(eps.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	if _, err := retryAPI(ctx, func(c context.Context) error {
		_, err := cs.DiscoveryV1().EndpointSlices(ns).Create(c, eps, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("endpointslice %s: %v", name, err)
	}
	return nil
}

// Delete removes the extra Services and their slices, then the namespace,
// and waits until the namespace is gone (so the proxies have dropped them
// before the next measurement); it works after ctx was cancelled.
func (e *Extra) Delete(say func(string, ...any)) (time.Duration, error) {
	if e == nil {
		return 0, nil
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	lctx, lcancel := context.WithTimeout(ctx, time.Minute)
	list, err := e.cs.CoreV1().Services(e.Namespace).List(lctx, metav1.ListOptions{})
	lcancel()
	if err == nil {
		var done atomic.Int64
		stop := progressEvery(5*time.Second, func() { say("extra Services: %d/%d deleted", done.Load(), len(list.Items)) })
		err = parallel(ctx, len(list.Items), func(i int) error {
			_, err := retryAPI(ctx, func(c context.Context) error {
				err := e.cs.CoreV1().Services(e.Namespace).Delete(c, list.Items[i].Name, metav1.DeleteOptions{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			})
			done.Add(1)
			return err
		})
		stop()
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	_ = e.cs.DiscoveryV1().EndpointSlices(e.Namespace).DeleteCollection(dctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	dcancel()
	if nerr := DeleteNamespace(e.cs, e.Namespace); nerr != nil && err == nil {
		err = nerr
	}
	for err == nil {
		_, gerr := e.cs.CoreV1().Namespaces().Get(ctx, e.Namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(gerr) {
			break
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("namespace %s still there after %s", e.Namespace, time.Since(start).Round(time.Second))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return time.Since(start), err
}

// parallel runs do(0..n-1) on ExtraWorkers goroutines; the first error
// stops the handing out of new work and is returned.
func parallel(ctx context.Context, n int, do func(int) error) error {
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range min(ExtraWorkers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := do(i); err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(n)) // hand out nothing more
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// retryAPI makes one API call with its own deadline, retrying a few times
// when the server asks to (429, 5xx, timeouts): a busy local API server
// sheds load that way under bulk creation.
func retryAPI(ctx context.Context, call func(context.Context) error) (int, error) {
	var err error
	for attempt := 1; ; attempt++ {
		c, cancel := context.WithTimeout(ctx, apiTimeout)
		err = call(c)
		cancel()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return attempt, nil
		}
		retriable := apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
			apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
		if !retriable || attempt == 5 || ctx.Err() != nil {
			return attempt, err
		}
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
}

// progressEvery calls f every d until the returned stop is called.
func progressEvery(d time.Duration, f func()) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() { close(quit); wg.Wait() }
}

// WaitProgrammed creates one more Service in front of the server pod, after
// the extra ones, and waits until a TCP connection to it from a client pod
// works: a proxy applies the changes it has seen in one sync, so when the
// newest Service carries traffic the extra Services are in the data plane
// too (kube-proxy iptables rewrites them all; nothing is measured while it
// still does). It returns how long that took.
func (s *Session) WaitProgrammed(ctx context.Context, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	const name = "sentinel"
	server, client := podName(false, "server"), ""
	for _, ep := range s.Endpoints {
		if ep.Path != PathHost {
			client = ep.ClientPod
			break
		}
	}
	if client == "" {
		return 0, fmt.Errorf("no pod or service path to carry a probe: measure extra Services with kube.paths pod or service")
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelKey: LabelValue}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"vnetlab.pod": server},
			Ports: []corev1.ServicePort{{Name: "rr", Protocol: corev1.ProtocolTCP, Port: 7001, TargetPort: intstr.FromInt32(7001)}}}}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	got, err := s.Client.CoreV1().Services(s.Namespace).Create(cctx, svc, metav1.CreateOptions{})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("create service %s: %v", name, err)
	}
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), apiTimeout)
		defer dcancel()
		_ = s.Client.CoreV1().Services(s.Namespace).Delete(dctx, name, metav1.DeleteOptions{})
	}()
	self, err := engine.SelfBinary()
	if err != nil {
		return 0, err
	}
	srv := s.Exec.Command(ctx, server, self, "rr-server", "--proto", "tcp", "--port", "7001")
	if err := srv.Start(); err != nil {
		return 0, fmt.Errorf("rr-server in pod %s: %v", server, err)
	}
	defer func() { srv.Kill(); _ = srv.Wait() }()
	addr := got.Spec.ClusterIP + ":7001"
	var last error
	for time.Since(start) < timeout {
		actx, acancel := context.WithTimeout(ctx, 10*time.Second)
		_, last = s.Exec.Command(actx, client, self, "rr-client", "--proto", "tcp", "--addr", addr, "--mode", "crr", "--duration", "1s").Output()
		acancel()
		if last == nil {
			return time.Since(start), nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(time.Second)
	}
	return 0, fmt.Errorf("Service %s (%s) created after the extra Services carried no connection within %s (last: %v): the proxy is still programming them, or dropped them", name, addr, timeout, last)
}

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
)

// The EndpointSlice controller's share of network programming latency,
// measured apart. kube converge writes its Service's EndpointSlice itself,
// so its latencies start at the slice's write; in a cluster that write is
// the EndpointSlice controller's, after a pod changed. controllerShare
// times that hop alone: a second Service selects the backends by ctlLabel,
// and the second backend's label is set and removed in turn, each change
// timed from the pod's write to the watch event of the Service's slice
// with the pod in (or out): the API's write, the controller's watch, its
// sync and its slice's write, and one watch's delivery (as a proxy's).
const (
	ctlName  = "converge-ctl"
	ctlLabel = "vnetlab.io/converge-ctl"
)

// DefaultControllerChanges is how many label changes controllerShare
// times (--controller-changes).
const DefaultControllerChanges = 40

// controllerShare runs n label changes (half in, half out) after the
// measured ones, with the cycle's pauses between them.
func (c *converger) controllerShare(ctx context.Context, n int) (*converge.ControllerChanges, error) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ctlName, Labels: map[string]string{measure.LabelKey: measure.LabelValue}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{ctlLabel: "in"},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: convKeepPort, TargetPort: intstr.FromInt32(convKeepBackPort)}}}}
	if _, err := c.cs.CoreV1().Services(c.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create Service %s: %v", ctlName, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// From the API server's cache as it is ("0"), not from etcd's newest
	// version: a watch asking for the newest waits until the cache has
	// seen it, and an etcd that cannot say how far the cache is (3.4.23,
	// Debian's: no watch progress requests) leaves it waiting until the
	// watch fails ("Too large resource version") when no slice is written
	// in time. Every change after the watch opened still comes, in order.
	w, err := c.cs.DiscoveryV1().EndpointSlices(c.ns).Watch(wctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + ctlName, ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("watch the EndpointSlices of Service %s: %v", ctlName, err)
	}
	defer w.Stop()
	seen := make(chan sliceSeen, 64)
	go func() {
		defer close(seen)
		bySlice := map[string]bool{} // slice name: it holds the second backend
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				select {
				case seen <- sliceSeen{err: apierrors.FromObject(ev.Object)}:
				case <-wctx.Done():
				}
				return
			}
			es, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			bySlice[es.Name] = holds(es, c.ipB) && ev.Type != watch.Deleted
			in := false
			for _, h := range bySlice {
				in = in || h
			}
			select {
			case seen <- sliceSeen{at: time.Now(), in: in}:
			case <-wctx.Done():
				return
			}
		}
	}()
	// The first backend in, so the Service has a slice, its write waited for.
	if _, err := c.label(ctx, backendA, true); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 47))
	var lat []int64
	notApplied := 0
	for i := range n {
		in := i%2 == 0
		at, err := c.label(ctx, backendB, in)
		if err != nil {
			return nil, err
		}
		d, ok, err := waitSlice(ctx, seen, at, in, c.spec.ChangeTimeout)
		switch {
		case err != nil:
			return nil, err
		case ok:
			lat = append(lat, d.Microseconds())
		default:
			notApplied++
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50*time.Millisecond + time.Duration(r.Int64N(int64(200*time.Millisecond)))):
		}
	}
	return &converge.ControllerChanges{LatencyUS: lat, NotApplied: notApplied}, nil
}

// sliceSeen is a watch event of the Service's slices: when it came, and
// whether they then held the second backend; or why the watch ended.
type sliceSeen struct {
	at  time.Time
	in  bool
	err error
}

// waitSlice waits for the first event after at whose slices hold (in) or
// no longer hold the second backend: its delay from at. Not ok: none came
// within limit. An error: the watch ended.
func waitSlice(ctx context.Context, seen <-chan sliceSeen, at time.Time, in bool, limit time.Duration) (time.Duration, bool, error) {
	timeout := time.After(limit)
	for {
		select {
		case s, open := <-seen:
			switch {
			case !open:
				return 0, false, fmt.Errorf("the watch of Service %s's EndpointSlices ended", ctlName)
			case s.err != nil:
				return 0, false, fmt.Errorf("the watch of Service %s's EndpointSlices failed: %v", ctlName, s.err)
			case s.in == in && s.at.After(at):
				return s.at.Sub(at), true, nil
			}
		case <-timeout:
			return 0, false, nil
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
	}
}

// holds says whether es has an endpoint at ip.
func holds(es *discoveryv1.EndpointSlice, ip string) bool {
	return slices.ContainsFunc(es.Endpoints, func(e discoveryv1.Endpoint) bool { return slices.Contains(e.Addresses, ip) })
}

// label sets (in) or removes pod's ctlLabel, returning the time taken
// just before the write.
func (c *converger) label(ctx context.Context, pod string, in bool) (time.Time, error) {
	v := `null`
	if in {
		v = `"in"`
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, ctlLabel, v))
	at := time.Now()
	if _, err := c.cs.CoreV1().Pods(c.ns).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return at, fmt.Errorf("label pod %s: %v", pod, err)
	}
	return at, nil
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/measure/rrbench"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

// The newest Service's data path: tcp_crr to a Service made after the
// changes (after the N others too), backend A behind it, the client the
// prober on backend A's node (same node), once the probers have stopped.
const (
	crrName    = "crr"
	crrPort    = 7001
	crrReady   = time.Minute // for the proxy to carry the new Service
	crrSamples = 5
)

// newestCRR measures tcp_crr to a Service created last: crrSamples runs of
// d each, connections per second, the client and the server pinned as
// vnetlab run pins them by default (both on the last CPU this process may
// use: a request/response test left to the scheduler on 2 vCPUs is
// bimodal).
func (c *converger) newestCRR(ctx context.Context, d time.Duration) (*converge.NewestCRR, error) {
	allowed, err := cpupin.Allowed()
	if err != nil {
		return nil, err
	}
	pins := cpupin.MustParse(cpupin.Default).Resolve(allowed)
	srv := c.exec.Command(ctx, backendA, image.VnetlabPath, "rr-server", "--proto", "tcp", "--port", fmt.Sprint(crrPort), "--cpu", fmt.Sprint(pins.Server))
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("rr-server in %s: %v", backendA, err)
	}
	defer func() { srv.Kill(); _ = srv.Wait() }()
	name, proto, port := "rr", corev1.ProtocolTCP, int32(crrPort)
	svc, err := c.cs.CoreV1().Services(c.ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: crrName, Labels: map[string]string{measure.LabelKey: measure.LabelValue}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(port)}}}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create Service %s: %v", crrName, err)
	}
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: crrName, Labels: map[string]string{discoveryv1.LabelServiceName: crrName}},
		AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{c.ipA}}}}
	if netip.MustParseAddr(c.ipA).Is6() {
		es.AddressType = discoveryv1.AddressTypeIPv6
	}
	if _, err := c.cs.DiscoveryV1().EndpointSlices(c.ns).Create(ctx, es, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create EndpointSlice %s: %v", crrName, err)
	}
	addr := netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), crrPort).String()
	run := func(d time.Duration) (float64, error) {
		rctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
		defer cancel()
		out, err := c.exec.Command(rctx, proberPod(0), image.VnetlabPath, "rr-client", "--proto", "tcp", "--addr", addr, "--mode", "crr",
			"--duration", d.String(), "--cpu", fmt.Sprint(pins.Client), "-o", "json").Output()
		if err != nil {
			return 0, err
		}
		var rep rrbench.Report
		if err := json.Unmarshal(out, &rep); err != nil {
			return 0, fmt.Errorf("rr-client's report: %v", err)
		}
		return rep.Rate, nil
	}
	deadline := time.Now().Add(crrReady)
	for {
		if _, err := run(time.Second); err == nil {
			break
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("the newest Service %s carried no connection within %s: %v", addr, crrReady, err)
		}
		time.Sleep(time.Second)
	}
	res := &converge.NewestCRR{Target: addr, Seconds: d.Seconds(), Pins: pins.String()}
	for range crrSamples {
		r, err := run(d)
		if err != nil {
			return nil, fmt.Errorf("tcp_crr to %s: %v", addr, err)
		}
		res.Rates = append(res.Rates, r)
	}
	return res, nil
}

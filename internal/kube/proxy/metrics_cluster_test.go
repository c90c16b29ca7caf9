package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/kube/proxy"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// nodeGet fetches url from inside node i's namespace, where the node's
// proxy listens (as a hostNetwork pod or kube-proxy's scrapers ask it).
func nodeGet(i int, url string) (string, error) {
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := nsutil.Do(nodeNS(i), func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return string(b), err
}

// Every node's proxy serves kube-proxy's status port: /proxyMode, and
// /metrics in Prometheus' text format (read by Prometheus' own parser),
// where a Service's EndpointSlice, written by the EndpointSlice controller
// with its trigger time, shows as a network programming latency and the
// sync that applied it as the last sync's time.
func TestProxyServesKubeProxyMetrics(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	lbl := map[string]string{"app": "metrics"}
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, lbl), clientPod("cli", 1))
	start := time.Now()
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "metrics"},
		Spec: corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustWho(t, podNetns(t, ips["cli"]), "tcp", hostport(svc.Spec.ClusterIP, 80), "srv", 30*time.Second)
	for i := 1; i <= 2; i++ {
		base := "http://" + proxy.DefaultMetricsAddr
		if mode, err := nodeGet(i, base+"/proxyMode"); err != nil || mode != proxy.ModeEBPF {
			t.Errorf("node%d /proxyMode: %q, %v; want %s", i, mode, err, proxy.ModeEBPF)
		}
		var mf map[string]*dto.MetricFamily
		// The node's proxy may sync a moment after node1's carried traffic.
		err := waitFor(10*time.Second, func() bool {
			body, err := nodeGet(i, base+"/metrics")
			if err != nil {
				return false
			}
			parser := expfmt.NewTextParser(model.LegacyValidation)
			mf, err = parser.TextToMetricFamilies(strings.NewReader(body))
			if err != nil {
				t.Fatalf("node%d: Prometheus' parser refuses /metrics: %v", i, err)
			}
			f := mf["kubeproxy_sync_proxy_rules_last_timestamp_seconds"]
			return f != nil && len(f.Metric) > 0 && f.Metric[0].GetGauge().GetValue() >= float64(start.Unix())
		})
		if err != nil {
			t.Fatalf("node%d: no sync after the Service was created: %v", i, err)
		}
		h := mf["kubeproxy_network_programming_duration_seconds"]
		if h == nil || len(h.Metric) == 0 || h.Metric[0].GetHistogram().GetSampleCount() == 0 {
			t.Errorf("node%d: no network programming latency observed (the slice's trigger time)", i)
			continue
		}
		hist := h.Metric[0].GetHistogram()
		t.Logf("node%d: %d programming latencies, mean %.3f s; %d syncs", i, hist.GetSampleCount(), hist.GetSampleSum()/float64(hist.GetSampleCount()),
			mf["kubeproxy_sync_proxy_rules_duration_seconds"].Metric[0].GetHistogram().GetSampleCount())
	}
}

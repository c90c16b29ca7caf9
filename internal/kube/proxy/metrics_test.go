package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// scrape reads m's endpoint as Prometheus would, with its own text parser.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mf, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("Prometheus' parser refuses the endpoint: %v\n%s", err, body)
	}
	return mf
}

// metric is family name's sample with label ip_family=family ("" : the
// one sample of an unlabelled metric).
func metric(t *testing.T, mf map[string]*dto.MetricFamily, name, family string) *dto.Metric {
	t.Helper()
	f, ok := mf[name]
	if !ok {
		t.Fatalf("no %s", name)
	}
	for _, m := range f.Metric {
		if family == "" && len(m.Label) == 0 {
			return m
		}
		for _, l := range m.Label {
			if l.GetName() == "ip_family" && l.GetValue() == family {
				return m
			}
		}
	}
	t.Fatalf("%s has no sample for ip_family %q", name, family)
	return nil
}

// kube-proxy's metrics, as vnetlab's proxy serves them: the changes
// recorded and pending, each sync's duration (the first a full one), its
// end, and the network programming latency of a slice change from its
// trigger time to the sync that wrote it; a slice listed at start (its
// trigger before the proxy) is not counted, nor one without a trigger.
func TestMetricsAsKubeProxys(t *testing.T) {
	f := newFakePlane()
	p, _ := newTestProxier(t, f)
	m := NewMetrics([]netip.Addr{netip.MustParseAddr("10.250.0.2"), netip.MustParseAddr("fd00::2")})
	p.Instrument(m)
	start := p.slices.since

	addObj(p, svcOf("10.96.0.20", sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080))))
	old := sliceOf("s-old", []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)})
	old.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: start.Add(-time.Hour).Format(time.RFC3339Nano)}
	addObj(p, old)
	mf := scrape(t, m)
	if v := metric(t, mf, "kubeproxy_sync_proxy_rules_service_changes_pending", "").GetGauge().GetValue(); v != 1 {
		t.Errorf("service changes pending %v, want 1", v)
	}
	if v := metric(t, mf, "kubeproxy_sync_proxy_rules_endpoint_changes_total", "").GetCounter().GetValue(); v != 1 {
		t.Errorf("endpoint changes total %v, want 1", v)
	}
	if v := metric(t, mf, "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", "IPv6").GetGauge().GetValue(); v < float64(start.Unix()) {
		t.Errorf("last queued %v, before the proxy started (%d)", v, start.Unix())
	}
	if _, err := p.SyncMeasured(); err != nil {
		t.Fatal(err)
	}

	// A change whose trigger was 2 s ago, after the proxy started.
	time.Sleep(10 * time.Millisecond)
	trig := time.Now().Add(-2 * time.Second)
	p.slices.since = trig.Add(-time.Second)
	moved := sliceOf("s-old", []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP)}, ep{ip: "10.244.2.9", ready: b(true)})
	moved.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: trig.Format(time.RFC3339Nano)}
	updateObj(p, moved)
	before := time.Now()
	if _, err := p.SyncMeasured(); err != nil {
		t.Fatal(err)
	}
	after := time.Now()

	mf = scrape(t, m)
	for _, fam := range []string{"IPv4", "IPv6"} {
		if n := metric(t, mf, "kubeproxy_sync_proxy_rules_duration_seconds", fam).GetHistogram().GetSampleCount(); n != 2 {
			t.Errorf("%s: %d syncs observed, want 2", fam, n)
		}
		if n := metric(t, mf, "kubeproxy_sync_full_proxy_rules_duration_seconds", fam).GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("%s: %d full syncs, want the first only", fam, n)
		}
		if n := metric(t, mf, "kubeproxy_sync_partial_proxy_rules_duration_seconds", fam).GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("%s: %d partial syncs, want 1", fam, n)
		}
		last := metric(t, mf, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", fam).GetGauge().GetValue()
		if last < float64(before.UnixNano())/1e9 || last > float64(after.UnixNano())/1e9 {
			t.Errorf("%s: last sync at %f, not within the sync [%d, %d]", fam, last, before.Unix(), after.Unix())
		}
	}
	h := metric(t, mf, "kubeproxy_network_programming_duration_seconds", "IPv4").GetHistogram()
	if h.GetSampleCount() != 1 {
		t.Fatalf("%d programming latencies observed, want the one change after start", h.GetSampleCount())
	}
	if lo, hi := before.Sub(trig).Seconds(), after.Sub(trig).Seconds(); h.GetSampleSum() < lo || h.GetSampleSum() > hi {
		t.Errorf("programming latency %.3f s, want between the trigger and the sync's end: [%.3f, %.3f]", h.GetSampleSum(), lo, hi)
	}
	if v := metric(t, mf, "kubeproxy_sync_proxy_rules_endpoint_changes_pending", "").GetGauge().GetValue(); v != 0 {
		t.Errorf("endpoint changes pending after the sync: %v", v)
	}
	if _, ok := mf["process_resident_memory_bytes"]; !ok {
		t.Error("no process metrics (kube-proxy serves them)")
	}
}

// A sync that fails keeps its trigger times for the one that succeeds.
func TestMetricsKeepTriggersOfAFailedSync(t *testing.T) {
	p, err := NewProxier("me", testNodeIPs, &failingPlane{fakePlane: newFakePlane(), fail: 1}, nil, fakeHealth{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(testNodeIPs)
	p.Instrument(m)
	p.slices.since = time.Now().Add(-time.Minute)
	addObj(p, svcOf("10.96.0.20", sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080))))
	es := sliceOf("s-1", []discoveryv1.EndpointPort{eport("web", 8080, corev1.ProtocolTCP)}, ep{ip: "10.244.1.5", ready: b(true)})
	es.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().Format(time.RFC3339Nano)}
	addObj(p, es)
	if _, err := p.SyncMeasured(); err == nil {
		t.Fatal("the failing plane's sync succeeded")
	}
	if _, ok := scrape(t, m)["kubeproxy_network_programming_duration_seconds"]; ok {
		t.Fatal("a failed sync observed a programming latency")
	}
	if _, err := p.SyncMeasured(); err != nil {
		t.Fatal(err)
	}
	if n := metric(t, scrape(t, m), "kubeproxy_network_programming_duration_seconds", "IPv4").GetHistogram().GetSampleCount(); n != 1 {
		t.Fatalf("the retried sync observed %d programming latencies, want 1", n)
	}
}

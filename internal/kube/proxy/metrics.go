package proxy

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Metrics are the Prometheus metrics of kube-proxy's pkg/proxy/metrics
// (v1.37) that mean something for vnetlab's proxy, under kube-proxy's
// names, types, buckets and labels, so that dashboards and alerts made for
// kube-proxy read it unchanged, plus the process and Go
// runtime collectors kube-proxy registers too, served at /metrics of the
// status server (statusHandler, --metrics-bind-address). What each means
// here:
//
//   - kubeproxy_sync_proxy_rules_duration_seconds: one Sync, from taking
//     the recorded changes to the last map write; observed under every
//     ip_family the node serves, since one Sync programs both (kube-proxy
//     runs a proxier per family). The first Sync, which also prunes, is a
//     full one (…_full_…), every later one partial (…_partial_…): the
//     proxy never rewrites what did not change.
//   - kubeproxy_sync_proxy_rules_last_timestamp_seconds: the end of the
//     last Sync that succeeded; …_last_queued_timestamp_seconds: the last
//     change recorded.
//   - kubeproxy_network_programming_duration_seconds: for each
//     EndpointSlice change that carried the EndpointSlice controller's
//     trigger time (the endpoints.kubernetes.io/last-change-trigger-time
//     annotation: when the Pod or Service change that caused it happened),
//     from that time to the end of the Sync that applied it, labelled with
//     the slice's address type. It ends at the map write, not at a packet:
//     kube converge's measurement is what says when packets follow.
//   - kubeproxy_sync_proxy_rules_{service,endpoint}_changes_{pending,total}:
//     changes recorded and not yet synced, and all changes recorded.
//
// Not served: the iptables/nftables rule counts and failures (no such
// rules here) and sync_proxy_rules_no_local_endpoints_total.
type Metrics struct {
	reg                         *prometheus.Registry
	sync, syncFull, syncPartial *prometheus.HistogramVec
	programming                 *prometheus.HistogramVec
	lastSync, lastQueued        *prometheus.GaugeVec
	svcPending, epPending       prometheus.Gauge
	svcTotal, epTotal           prometheus.Counter
	families                    []string // the ip_family values a Sync is observed under
}

// metricsSubsystem starts every name, as kube-proxy's.
const metricsSubsystem = "kubeproxy"

// NewMetrics registers the metrics; a Sync is observed under the families
// of nodeIPs (IPv4 when there are none).
func NewMetrics(nodeIPs []netip.Addr) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	for _, ip := range nodeIPs {
		m.families = append(m.families, familyLabel(ip.Is4()))
	}
	if len(m.families) == 0 {
		m.families = []string{familyLabel(true)}
	}
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15) // 1 ms to 16 s, as kube-proxy's
	hist := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: metricsSubsystem, Name: name, Help: help, Buckets: buckets}, []string{"ip_family"})
		m.reg.MustRegister(h)
		return h
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: metricsSubsystem, Name: name, Help: help}, []string{"ip_family"})
		m.reg.MustRegister(g)
		return g
	}
	m.sync = hist("sync_proxy_rules_duration_seconds", "How long one sync of the Service maps took, in seconds", syncBuckets)
	m.syncFull = hist("sync_full_proxy_rules_duration_seconds", "How long the first sync (every Service, and a prune) took, in seconds", syncBuckets)
	m.syncPartial = hist("sync_partial_proxy_rules_duration_seconds", "How long a sync of the changed Services took, in seconds", syncBuckets)
	m.programming = hist("network_programming_duration_seconds", "From an EndpointSlice change's trigger time to the end of the sync that wrote it, in seconds", programmingBuckets())
	m.lastSync = gauge("sync_proxy_rules_last_timestamp_seconds", "When the last successful sync ended (Unix seconds)")
	m.lastQueued = gauge("sync_proxy_rules_last_queued_timestamp_seconds", "When the last change was recorded for a sync (Unix seconds)")
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Subsystem: metricsSubsystem, Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	pending := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: metricsSubsystem, Name: name, Help: help})
		m.reg.MustRegister(g)
		return g
	}
	m.svcPending = pending("sync_proxy_rules_service_changes_pending", "Service changes recorded and not synced yet")
	m.epPending = pending("sync_proxy_rules_endpoint_changes_pending", "EndpointSlice changes recorded and not synced yet")
	m.svcTotal = counter("sync_proxy_rules_service_changes_total", "Service changes recorded")
	m.epTotal = counter("sync_proxy_rules_endpoint_changes_total", "EndpointSlice changes recorded")
	m.reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return m
}

// programmingBuckets are kube-proxy's: 0.25 s and 0.5 s, every second to
// 59 s, every 5 s to 115 s, every 30 s to 5 min.
func programmingBuckets() []float64 {
	b := prometheus.LinearBuckets(0.25, 0.25, 2)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	return append(b, prometheus.LinearBuckets(120, 30, 7)...)
}

// familyLabel is an ip_family value, spelled as kube-proxy's (the API's IPFamily).
func familyLabel(v4 bool) string {
	if v4 {
		return string(corev1.IPv4Protocol)
	}
	return string(corev1.IPv6Protocol)
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// queued notes a change recorded (slice: an EndpointSlice's, else a
// Service's) and what is pending now. A nil m measures nothing.
func (m *Metrics) queued(slice bool, svcPending, epPending int) {
	if m == nil {
		return
	}
	if slice {
		m.epTotal.Inc()
	} else {
		m.svcTotal.Inc()
	}
	m.pending(svcPending, epPending)
	now := unixSeconds(time.Now())
	for _, f := range m.families {
		m.lastQueued.WithLabelValues(f).Set(now)
	}
}

func (m *Metrics) pending(svcs, eps int) {
	m.svcPending.Set(float64(svcs))
	m.epPending.Set(float64(eps))
}

// synced observes a Sync that started at t0 (full: the first), and, when
// it succeeded, the trigger times it applied.
func (m *Metrics) synced(t0 time.Time, full bool, triggers []trigger, err error, svcPending, epPending int) {
	if m == nil {
		return
	}
	end := time.Now()
	d := end.Sub(t0).Seconds()
	for _, f := range m.families {
		m.sync.WithLabelValues(f).Observe(d)
		if full {
			m.syncFull.WithLabelValues(f).Observe(d)
		} else {
			m.syncPartial.WithLabelValues(f).Observe(d)
		}
		if err == nil {
			m.lastSync.WithLabelValues(f).Set(unixSeconds(end))
		}
	}
	if err == nil {
		for _, t := range triggers {
			m.programming.WithLabelValues(t.family).Observe(end.Sub(t.at).Seconds())
		}
	}
	m.pending(svcPending, epPending)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// trigger is one EndpointSlice change's trigger time and its family.
type trigger struct {
	family string
	at     time.Time
}

// triggerOf is slice es's trigger time, when it has one after since (a
// proxy that starts does not count the listing of what was already there,
// as kube-proxy does not).
func triggerOf(es *discoveryv1.EndpointSlice, since time.Time) (trigger, bool) {
	v, ok := es.Annotations[corev1.EndpointsLastChangeTriggerTime]
	if !ok {
		return trigger{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || !at.After(since) {
		return trigger{}, false
	}
	return trigger{family: familyLabel(es.AddressType != discoveryv1.AddressTypeIPv6), at: at}, true
}

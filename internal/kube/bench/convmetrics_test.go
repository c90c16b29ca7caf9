package bench

import (
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
)

// The histograms are read with Prometheus' parser and summed over their
// series (vnetlab's proxy labels them by IP family); a page without them
// reads zero (vnetlab's proxy has no conntrack reconciler); a malformed
// page is an error.
func TestParseProxyMetrics(t *testing.T) {
	page := `# HELP kubeproxy_network_programming_duration_seconds x
# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 3
kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"} 0.25
kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"} 3
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 1
kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv6"} 0.5
kubeproxy_network_programming_duration_seconds_count{ip_family="IPv6"} 1
# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="+Inf"} 7
kubeproxy_sync_proxy_rules_duration_seconds_sum 0.07
kubeproxy_sync_proxy_rules_duration_seconds_count 7
# TYPE kubeproxy_conntrack_reconciler_sync_duration_seconds histogram
kubeproxy_conntrack_reconciler_sync_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 2
kubeproxy_conntrack_reconciler_sync_duration_seconds_sum{ip_family="IPv4"} 3.5
kubeproxy_conntrack_reconciler_sync_duration_seconds_count{ip_family="IPv4"} 2
`
	pm, err := parseProxyMetrics(page)
	if err != nil {
		t.Fatal(err)
	}
	if want := (proxyMetrics{histo{0.75, 4}, histo{0.07, 7}, histo{3.5, 2}}); pm != want {
		t.Errorf("read %+v, want %+v", pm, want)
	}
	if pm, err := parseProxyMetrics("# TYPE other counter\nother 1\n"); err != nil || pm != (proxyMetrics{}) {
		t.Errorf("a page without them: %+v %v", pm, err)
	}
	if _, err := parseProxyMetrics("not a metric {\n"); err == nil {
		t.Error("a malformed page parsed")
	}
}

// A proxy whose mean sync is more than half the change timeout is named,
// with a timeout three times its sync; one at or below half is not.
func TestSlowSyncs(t *testing.T) {
	syncs := map[string]converge.ProxySyncs{"n1": {Syncs: 127, MeanUS: 10248770}, "n2": {Syncs: 125, MeanUS: 10213530}}
	want := "n1's proxy took 10.249s per sync on average, more than half --change-timeout 10s: a change waits about a sync, and those counted as not applied may have come later; measure again with --change-timeout 31s"
	if got := slowSyncs(syncs, 10*time.Second); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := slowSyncs(syncs, time.Minute); got != "" {
		t.Errorf("a 10 s sync against a 1 min timeout: %q, want no warning", got)
	}
	if got := slowSyncs(map[string]converge.ProxySyncs{"n1": {Syncs: 150, MeanUS: 5000000}}, 10*time.Second); got != "" {
		t.Errorf("a sync of exactly half the timeout: %q, want no warning", got)
	}
	if got := slowSyncs(nil, 10*time.Second); got != "" {
		t.Errorf("no syncs (not a local cluster): %q", got)
	}
}

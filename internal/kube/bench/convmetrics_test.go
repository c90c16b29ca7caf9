package bench

import "testing"

// The two histograms are read with Prometheus' parser and summed over
// their series (vnetlab's proxy labels them by IP family); a page without
// them reads zero; a malformed page is an error.
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
`
	prog, sync, err := parseProxyMetrics(page)
	if err != nil {
		t.Fatal(err)
	}
	if prog.count != 4 || prog.sum != 0.75 || sync.count != 7 || sync.sum != 0.07 {
		t.Errorf("programming %+v, sync %+v; want 4 observations summing 0.75 s, 7 syncs summing 0.07 s", prog, sync)
	}
	if p, s, err := parseProxyMetrics("# TYPE other counter\nother 1\n"); err != nil || p.count != 0 || s.count != 0 {
		t.Errorf("a page without them: %+v %+v %v", p, s, err)
	}
	if _, _, err := parseProxyMetrics("not a metric {\n"); err == nil {
		t.Error("a malformed page parsed")
	}
}

package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
)

// kube-proxy's metrics (vnetlab's proxy serves the same names): the
// network programming duration, from an EndpointSlice's trigger time to the
// end of the sync that wrote it, and each sync's duration; and kube-proxy's
// own, its conntrack reconciler's runs (at the end of a sync it lists the
// node's conntrack entries and deletes the UDP ones of removed endpoints:
// vnetlab's proxy has none, its flows are in its own maps).
const (
	metricProgramming = "kubeproxy_network_programming_duration_seconds"
	metricSync        = "kubeproxy_sync_proxy_rules_duration_seconds"
	metricReconcile   = "kubeproxy_conntrack_reconciler_sync_duration_seconds"
)

// histo is a histogram's sum (seconds) and count, over all its series.
type histo struct {
	sum   float64
	count uint64
}

// scraper reads every node's proxy's metrics from inside the node's
// namespace (a local cluster's: the status port listens on the node's
// loopback, as kube-proxy's does).
type scraper struct {
	nodeNS      map[string]string       // node name -> its namespace
	programming map[string]histo        // the last scrape's, per node
	first       map[string]proxyMetrics // the first scrape's
	last        map[string]proxyMetrics
	conntrack   map[string]int64 // the node's conntrack entries, after the changes
	failed      map[string]error
}

// proxyMetrics are the histograms a scrape reads.
type proxyMetrics struct{ programming, sync, reconcile histo }

func newScraper(nodeNS map[string]string) *scraper {
	return &scraper{nodeNS: nodeNS, programming: map[string]histo{}, first: map[string]proxyMetrics{}, last: map[string]proxyMetrics{},
		conntrack: map[string]int64{}, failed: map[string]error{}}
}

// scrape reads node's histograms.
func (s *scraper) scrape(ctx context.Context, node string) (pm proxyMetrics, err error) {
	ns, ok := s.nodeNS[node]
	if !ok {
		return pm, fmt.Errorf("node %s has no namespace of a local cluster", node)
	}
	page, err := cluster.NodeProxyGet(ctx, ns, "/metrics")
	if err != nil {
		return pm, err
	}
	return parseProxyMetrics(page)
}

// parseProxyMetrics reads the histograms from a /metrics page with
// Prometheus' text parser; a histogram the page lacks is zero.
func parseProxyMetrics(page string) (pm proxyMetrics, err error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mf, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		return pm, fmt.Errorf("parse /metrics: %v", err)
	}
	read := func(name string) histo {
		var h histo
		if f, ok := mf[name]; ok {
			for _, m := range f.GetMetric() {
				h.sum += m.GetHistogram().GetSampleSum()
				h.count += m.GetHistogram().GetSampleCount()
			}
		}
		return h
	}
	return proxyMetrics{read(metricProgramming), read(metricSync), read(metricReconcile)}, nil
}

// baseline scrapes every node before the first change.
func (s *scraper) baseline(ctx context.Context, say func(string, ...any)) {
	for n := range s.nodeNS {
		pm, err := s.scrape(ctx, n)
		if err != nil {
			s.failed[n] = err
			say("converge: node %s's proxy metrics not scraped (%v): its latencies are measured without them", n, err)
			continue
		}
		s.programming[n], s.first[n], s.last[n] = pm.programming, pm, pm
	}
}

// observe fills ch.MetricUS for an EndpointSlice change: per node, the
// growth of the network programming histogram's sum over its count's since
// the last scrape (one slice write per change: its one observation). A proxy observes
// after its sync, which may end a moment after the packets showed the
// change: an EndpointSlice change is scraped again for up to wait until
// its observation arrives.
func (s *scraper) observe(ctx context.Context, ch *converge.Change, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for n := range s.nodeNS {
		if s.failed[n] != nil {
			continue
		}
		for {
			pm, err := s.scrape(ctx, n)
			if err != nil {
				s.failed[n] = err
				break
			}
			prog, last := pm.programming, s.programming[n]
			s.last[n] = pm
			if prog.count > last.count && !writesSlice(ch.Kind) {
				// A Service's write carries no trigger time: what the
				// proxy observed starts at an earlier slice write (a
				// Service created again is programmed with its slice's
				// old trigger time), not this change's.
				s.programming[n] = prog
				break
			}
			if prog.count > last.count {
				if ch.MetricUS == nil {
					ch.MetricUS = map[string]int64{}
				}
				ch.MetricUS[n] = int64((prog.sum - last.sum) / float64(prog.count-last.count) * 1e6)
				s.programming[n] = prog
				break
			}
			if !writesSlice(ch.Kind) || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// syncs is each node's syncs during the run (how many, their mean), its
// conntrack reconciler's runs and the node's conntrack entries.
func (s *scraper) syncs() map[string]converge.ProxySyncs {
	out := map[string]converge.ProxySyncs{}
	mean := func(first, last histo) (int, float64) {
		n := int(last.count - first.count)
		if n == 0 {
			return 0, 0
		}
		return n, (last.sum - first.sum) / float64(n) * 1e6
	}
	for n, last := range s.last {
		var ps converge.ProxySyncs
		ps.Syncs, ps.MeanUS = mean(s.first[n].sync, last.sync)
		ps.Reconciles, ps.ReconcileMeanUS = mean(s.first[n].reconcile, last.reconcile)
		ps.ConntrackEntries = s.conntrack[n]
		out[n] = ps
	}
	return out
}

// slowSyncs warns when a node's proxy synced, on average, in more than
// half the change timeout: a change then waits about a sync, and one
// counted as not applied may have come just after the timeout (kube-proxy
// iptables took 10.2 s per sync at 30,000 Services here, against the
// default 10 s). It names the slowest node and a timeout three times its
// mean; "" when no node is that slow.
func slowSyncs(syncs map[string]converge.ProxySyncs, timeout time.Duration) string {
	node, slowest := "", time.Duration(0)
	for n, s := range syncs {
		if d := time.Duration(s.MeanUS * float64(time.Microsecond)); d > slowest || d == slowest && n < node {
			node, slowest = n, d
		}
	}
	if slowest <= timeout/2 {
		return ""
	}
	return fmt.Sprintf("%s's proxy took %s per sync on average, more than half --change-timeout %s: a change waits about a sync, and those counted as not applied may have come later; measure again with --change-timeout %s",
		node, slowest.Round(time.Millisecond), timeout, (3 * slowest).Round(time.Second))
}

// countConntrack reads each node's conntrack entries now (its namespace's
// nf_conntrack_count: the probers' flows make most of them).
func (s *scraper) countConntrack() {
	for n, ns := range s.nodeNS {
		if v, err := converge.ConntrackEntries(ns); err == nil {
			s.conntrack[n] = v
		}
	}
}

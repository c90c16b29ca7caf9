package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// kube-proxy's metrics (vnetlab's proxy serves the same names): the
// network programming duration, from an EndpointSlice's trigger time to the
// end of the sync that wrote it, and each sync's duration.
const (
	metricProgramming = "kubeproxy_network_programming_duration_seconds"
	metricSync        = "kubeproxy_sync_proxy_rules_duration_seconds"
	// proxyMetricsURL is kube-proxy's status port, on a node's loopback.
	proxyMetricsURL = "http://127.0.0.1:10249/metrics"
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
	nodeNS      map[string]string // node name -> its namespace
	programming map[string]histo  // the last scrape's, per node
	syncFirst   map[string]histo  // the first scrape's sync durations
	syncLast    map[string]histo
	failed      map[string]error
}

func newScraper(nodeNS map[string]string) *scraper {
	return &scraper{nodeNS: nodeNS, programming: map[string]histo{}, syncFirst: map[string]histo{}, syncLast: map[string]histo{}, failed: map[string]error{}}
}

// scrape reads node's two histograms.
func (s *scraper) scrape(ctx context.Context, node string) (prog, sync histo, err error) {
	ns, ok := s.nodeNS[node]
	if !ok {
		return prog, sync, fmt.Errorf("node %s has no namespace of a local cluster", node)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := nsutil.Do(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, proxyMetricsURL, nil)
	if err != nil {
		return prog, sync, err
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return prog, sync, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return prog, sync, err
	}
	if resp.StatusCode != http.StatusOK {
		return prog, sync, fmt.Errorf("%s: %s", proxyMetricsURL, resp.Status)
	}
	return parseProxyMetrics(string(body))
}

// parseProxyMetrics reads the two histograms from a /metrics page with
// Prometheus' text parser; a histogram the page lacks is zero.
func parseProxyMetrics(page string) (prog, sync histo, err error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mf, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		return prog, sync, fmt.Errorf("parse /metrics: %v", err)
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
	return read(metricProgramming), read(metricSync), nil
}

// baseline scrapes every node before the first change.
func (s *scraper) baseline(ctx context.Context, say func(string, ...any)) {
	for n := range s.nodeNS {
		prog, sync, err := s.scrape(ctx, n)
		if err != nil {
			s.failed[n] = err
			say("converge: node %s's proxy metrics not scraped (%v): its latencies are measured without them", n, err)
			continue
		}
		s.programming[n], s.syncFirst[n], s.syncLast[n] = prog, sync, sync
	}
}

// observe fills ch.MetricUS for an EndpointSlice change: per node, the
// growth of the network programming histogram's sum over its count's since
// the last scrape (one slice write per change: its one observation). A proxy observes
// after its sync, which may end a moment after the packets showed the
// change: an EndpointSlice change is scraped again for up to wait until
// its observation arrives.
func (s *scraper) observe(ctx context.Context, ch *results.Change, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for n := range s.nodeNS {
		if s.failed[n] != nil {
			continue
		}
		for {
			prog, sync, err := s.scrape(ctx, n)
			if err != nil {
				s.failed[n] = err
				break
			}
			last := s.programming[n]
			s.syncLast[n] = sync
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

// syncs is each node's syncs during the run: how many, and their mean.
func (s *scraper) syncs() map[string]results.ProxySyncs {
	out := map[string]results.ProxySyncs{}
	for n, last := range s.syncLast {
		first := s.syncFirst[n]
		ps := results.ProxySyncs{Syncs: int(last.count - first.count)}
		if ps.Syncs > 0 {
			ps.MeanUS = (last.sum - first.sum) / float64(ps.Syncs) * 1e6
		}
		out[n] = ps
	}
	return out
}

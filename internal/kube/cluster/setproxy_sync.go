package cluster

// Waiting for a node's new Service proxy: its first sync, read from the
// proxy's own metrics (kube-proxy's and vnetlab's serve the same names on
// the node's loopback port 10249), and what the process used for it.

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vnetlab/vnetlab/internal/measure/cpu"
)

const (
	// metricLastSync is the end of a proxy's last successful sync (Unix
	// seconds), one series per IP family it serves.
	metricLastSync = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	// proxyMetricsAddr is the proxies' status port, on a node's loopback
	// (configs.go's metricsBindAddress; vnetlab's proxy's default).
	proxyMetricsAddr = "127.0.0.1:10249"
)

// waitSynced waits until every node's proxy (pids, by node) has synced
// since it started (after since), at most timeout, saying each node's
// first sync as it comes and every 30 s what it still waits for.
func (b *builder) waitSynced(ctx context.Context, since time.Time, timeout time.Duration, pids map[string]int) ([]NodeSync, error) {
	deadline := time.Now().Add(timeout)
	done := map[string]NodeSync{}
	last := map[string]string{} // why a node has not synced yet
	nextSay := time.Now().Add(30 * time.Second)
	for len(done) < len(b.nodes) {
		for _, n := range b.nodes {
			if _, ok := done[n.name]; ok {
				continue
			}
			at, err := lastSync(ctx, n.ns)
			switch {
			case err != nil:
				last[n.name] = err.Error()
			case at.Before(since):
				last[n.name] = "no sync since it started"
			default:
				ns := NodeSync{Node: n.name, PID: pids[n.name], FirstSync: at.Sub(since)}
				if u, err := cpu.OfProcess(ns.PID); err == nil {
					ns.CPU, ns.RSS = u.CPU, u.RSS
				}
				ns.PeakRSS = peakRSS(ns.PID)
				done[n.name] = ns
				b.say("node %s: first sync done %s after the start (proxy CPU %s, RSS %d MB, peak %d MB)", n.name, ns.FirstSync.Round(time.Millisecond),
					ns.CPU.Round(10*time.Millisecond), ns.RSS>>20, ns.PeakRSS>>20)
			}
		}
		if len(done) == len(b.nodes) {
			break
		}
		if err := b.checkDaemons(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			var why []string
			for n, w := range last {
				if _, ok := done[n]; !ok {
					why = append(why, fmt.Sprintf("%s: %s (see %s)", n, w, b.logPath(n+proxyLogSuffix(b.spec.Proxy))))
				}
			}
			return nil, fmt.Errorf("the new proxies had not synced within %s (--timeout): %s", timeout, strings.Join(why, "; "))
		}
		if time.Now().After(nextSay) {
			b.say("waiting for %d of %d nodes' first sync (%s so far)", len(b.nodes)-len(done), len(b.nodes), time.Since(since).Round(time.Second))
			nextSay = time.Now().Add(30 * time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	var out []NodeSync
	for _, n := range b.nodes {
		out = append(out, done[n.name])
	}
	return out, nil
}

// lastSync reads the end of the last sync of the proxy of the node whose
// namespace is ns: of every family it serves, the earliest (zero time
// while one has not synced).
func lastSync(ctx context.Context, ns string) (time.Time, error) {
	page, err := NodeProxyGet(ctx, ns, "/metrics")
	if err != nil {
		return time.Time{}, err
	}
	return parseLastSync(page)
}

// parseLastSync reads metricLastSync from a /metrics page: the earliest of
// its series (zero when it has none or one is 0: not synced yet).
func parseLastSync(page string) (time.Time, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mf, err := parser.TextToMetricFamilies(strings.NewReader(page))
	if err != nil {
		return time.Time{}, fmt.Errorf("parse /metrics: %v", err)
	}
	f, ok := mf[metricLastSync]
	if !ok || len(f.GetMetric()) == 0 {
		return time.Time{}, nil
	}
	least := math.Inf(1)
	for _, m := range f.GetMetric() {
		least = min(least, m.GetGauge().GetValue())
	}
	if least <= 0 {
		return time.Time{}, nil
	}
	sec, frac := math.Modf(least)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// peakRSS is process pid's peak resident memory (VmHWM, bytes; 0 when
// unreadable).
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

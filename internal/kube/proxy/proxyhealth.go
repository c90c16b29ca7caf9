package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// kube-proxy's own servers, which vnetlab's proxy serves as kube-proxy
// does (load balancers, node tooling and upstream's e2e read them):
//   - the proxy health server (--healthz-bind-address, all addresses port
//     10256): /healthz and /livez, 200 while the syncs keep up with the
//     changes, 503 once a change waited HealthTimeout; /healthz also 503
//     while the node is being deleted (or not seen yet);
//   - the status server (--metrics-bind-address, loopback port 10249):
//     /proxyMode (the proxy's mode) and /healthz ("ok"); no /metrics.
const (
	DefaultHealthzAddr = "0.0.0.0:10256"
	DefaultMetricsAddr = "127.0.0.1:10249"
	// HealthTimeout is how long a recorded change may wait for its sync
	// before the proxy is unhealthy: kube-proxy's is twice its syncPeriod
	// (30 s by default).
	HealthTimeout = 60 * time.Second
	// ToBeDeletedTaint is the Cluster Autoscaler's taint on a node it is
	// about to delete: /healthz says 503 so load balancers drain it.
	ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"
)

// proxyHealth follows the syncs for the proxy health server: the oldest
// change recorded and not yet synced, the last sync that succeeded, and
// the node (for /healthz's nodeEligible). Its methods accept a nil
// receiver (a Proxier without one: the unit tests).
type proxyHealth struct {
	now      func() time.Time
	timeout  time.Duration
	families []corev1.IPFamily // the node's: one sync writes both families' maps

	mu          sync.Mutex
	lastUpdated time.Time // the last successful sync (or the start)
	pending     time.Time // the oldest change not yet taken by a sync (zero: none)
	inflight    time.Time // the oldest change a sync took and none has applied yet
	node        *corev1.Node
	nodeSeen    bool
}

func newProxyHealth(families []corev1.IPFamily, timeout time.Duration, now func() time.Time) *proxyHealth {
	if now == nil {
		now = time.Now
	}
	return &proxyHealth{now: now, timeout: timeout, families: families}
}

// started marks the proxy started (kube-proxy: its sync loop's start):
// healthy until a change waits too long.
func (h *proxyHealth) started() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated = h.now()
}

// queued notes a change recorded (kube-proxy's QueuedUpdate).
func (h *proxyHealth) queued() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pending.IsZero() {
		h.pending = h.now()
	}
}

// syncing notes that a sync takes the changes recorded so far.
func (h *proxyHealth) syncing() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight.IsZero() {
		h.inflight = h.pending
	}
	h.pending = time.Time{}
}

// updated notes a sync that applied everything it took (kube-proxy's
// Updated); a failed sync leaves its changes in flight.
func (h *proxyHealth) updated() {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight = time.Time{}
	h.lastUpdated = h.now()
}

// setNode is the node as the API server says it (nil: deleted).
func (h *proxyHealth) setNode(n *corev1.Node) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.node, h.nodeSeen = n, true
}

// healthReport is the servers' JSON body, kube-proxy's fields.
type healthReport struct {
	LastUpdated  time.Time                        `json:"lastUpdated"`
	CurrentTime  time.Time                        `json:"currentTime"`
	NodeEligible *bool                            `json:"nodeEligible,omitempty"`
	Healthy      bool                             `json:"healthy"`
	Status       map[corev1.IPFamily]familyHealth `json:"status,omitempty"`
}

type familyHealth struct {
	LastUpdated time.Time `json:"lastUpdated"`
	Healthy     bool      `json:"healthy"`
}

// report says whether the syncs keep up: unhealthy once the oldest change
// not applied waited the timeout.
func (h *proxyHealth) report() healthReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	oldest := h.inflight
	if oldest.IsZero() || (!h.pending.IsZero() && h.pending.Before(oldest)) {
		oldest = h.pending
	}
	r := healthReport{LastUpdated: h.lastUpdated, CurrentTime: now,
		Healthy: h.lastUpdated.IsZero() || oldest.IsZero() || now.Sub(oldest) < h.timeout}
	r.Status = map[corev1.IPFamily]familyHealth{}
	for _, f := range h.families {
		r.Status[f] = familyHealth{LastUpdated: h.lastUpdated, Healthy: r.Healthy}
	}
	return r
}

// Healthy is the syncs' health alone (the healthCheckNodePort servers'
// serviceProxyHealthy).
func (h *proxyHealth) Healthy() bool { return h == nil || h.report().Healthy }

// nodeEligible: the node is known, not being deleted and not tainted for
// deletion by the Cluster Autoscaler.
func (h *proxyHealth) nodeEligible() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.nodeSeen || h.node == nil || h.node.DeletionTimestamp != nil {
		return false
	}
	for _, t := range h.node.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// Handler serves /healthz (the syncs and the node) and /livez (the syncs):
// 200 or 503 with the JSON report; a healthy report's lastUpdated is now,
// as kube-proxy's (older releases said the last sync loop's run).
func (h *proxyHealth) Handler() http.Handler {
	mux := http.NewServeMux()
	serve := func(w http.ResponseWriter, withNode bool) {
		r := h.report()
		healthy := r.Healthy
		if withNode {
			eligible := h.nodeEligible()
			r.NodeEligible = &eligible
			healthy = healthy && eligible
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if healthy {
			r.LastUpdated = r.CurrentTime
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		b, _ := json.Marshal(r)
		_, _ = w.Write(b)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { serve(w, true) })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { serve(w, false) })
	return mux
}

// statusHandler is the status server's: /proxyMode says mode, /healthz
// "ok", /metrics serves metrics (kube-proxy's, metrics.go; nil: none).
func statusHandler(mode string, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("/metrics", metrics)
	}
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = fmt.Fprint(w, mode)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = fmt.Fprint(w, "ok")
	})
	return mux
}

// serveOn listens on addr ("" serves nothing: nil) and serves h until ctx
// ends. The listener is made here, so a taken port is Run's error.
func serveOn(ctx context.Context, what, addr string, h http.Handler, logf func(string, ...any)) (net.Addr, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w (set another address with its flag, or \"\" for none)", what, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logf("%s on %s: %v", what, addr, err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	logf("%s on %s", what, ln.Addr())
	return ln.Addr(), nil
}

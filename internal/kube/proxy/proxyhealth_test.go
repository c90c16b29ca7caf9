package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// healthGet asks a loopback server's path: the status and the JSON body.
func healthGet(t *testing.T, addr, path string) (int, healthReport, map[string]any) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}} // loopback, never a proxy
	r, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	var rep healthReport
	var raw map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("%s: body %q: %v", path, b, err)
	}
	_ = json.Unmarshal(b, &raw)
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: content type %q", path, ct)
	}
	return r.StatusCode, rep, raw
}

// The proxy health server on a loopback listener: /healthz and /livez say
// 200 while no change waits, and still 200 while the oldest has waited
// less than the timeout; 503 once it waited the timeout (lastUpdated is then
// the last sync, not now), also when the sync that took it failed; 200
// after a sync applies it. /healthz also needs the node, seen and neither
// being deleted nor tainted for deletion.
func TestProxyHealthServer(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h := newProxyHealth([]corev1.IPFamily{corev1.IPv4Protocol}, HealthTimeout, clk.now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := serveOn(ctx, "proxy health server", "127.0.0.1:0", h.Handler(), t.Logf) // the machine's namespace: loopback only
	if err != nil {
		t.Fatal(err)
	}
	addr := a.String()
	expect := func(what, path string, code int, healthy bool, last time.Time) map[string]any {
		t.Helper()
		got, rep, raw := healthGet(t, addr, path)
		if got != code || rep.Healthy != healthy || !rep.CurrentTime.Equal(clk.now()) || !rep.LastUpdated.Equal(last) {
			t.Fatalf("%s: %s said %d %+v, want %d healthy %v lastUpdated %s currentTime %s", what, path, got, rep, code, healthy, last, clk.now())
		}
		if st := rep.Status[corev1.IPv4Protocol]; st.Healthy != healthy {
			t.Fatalf("%s: %s status %+v, want IPv4 healthy %v", what, path, rep.Status, healthy)
		}
		_, hasNode := raw["nodeEligible"]
		if hasNode != (path == "/healthz") {
			t.Fatalf("%s: %s body %v: nodeEligible only in /healthz's", what, path, raw)
		}
		return raw
	}

	h.started()
	start := clk.now()
	clk.step(time.Second)
	if raw := expect("node not seen", "/healthz", 503, true, start); raw["nodeEligible"] != false {
		t.Fatalf("node not seen: nodeEligible %v", raw["nodeEligible"])
	}
	expect("node not seen", "/livez", 200, true, clk.now())
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "me"}}
	h.setNode(node)
	if raw := expect("fresh", "/healthz", 200, true, clk.now()); raw["nodeEligible"] != true {
		t.Fatalf("fresh: nodeEligible %v", raw["nodeEligible"])
	}

	h.queued()
	clk.step(HealthTimeout - time.Second)
	h.queued() // a later change: the oldest counts
	expect("a change waiting less than the timeout", "/healthz", 200, true, clk.now())
	clk.step(time.Second)
	expect("a change waiting the timeout", "/healthz", 503, false, start)
	expect("a change waiting the timeout", "/livez", 503, false, start)

	h.syncing() // a sync takes it and fails: still waiting
	clk.step(time.Second)
	expect("its sync failed", "/livez", 503, false, start)
	h.syncing()
	h.updated()
	synced := clk.now()
	expect("synced", "/livez", 200, true, synced)
	expect("synced", "/healthz", 200, true, synced)

	// A change recorded while a sync runs is not the sync's.
	h.syncing()
	h.queued()
	h.updated()
	clk.step(HealthTimeout)
	expect("a change during a sync, never synced", "/livez", 503, false, synced)
	h.syncing()
	h.updated()

	tainted := node.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{{Key: ToBeDeletedTaint, Effect: corev1.TaintEffectNoSchedule}}
	h.setNode(tainted)
	expect("node tainted for deletion", "/healthz", 503, true, clk.now())
	expect("node tainted for deletion", "/livez", 200, true, clk.now())
	deleting := node.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: clk.now()}
	h.setNode(deleting)
	expect("node being deleted", "/healthz", 503, true, clk.now())
	h.setNode(nil)
	expect("node deleted", "/healthz", 503, true, clk.now())
	h.setNode(node)
	expect("node back", "/healthz", 200, true, clk.now())
}

// The Proxier drives the health: a recorded change is pending until a Sync
// applies it; a failed Sync leaves it pending; and the healthCheckNodePort
// servers say 503 and serviceProxyHealthy false while the syncs lag.
func TestProxierSyncHealth(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	f := &failingPlane{fakePlane: newFakePlane(), fail: 1}
	p, err := NewProxier("me", testNodeIPs, f, nil, fakeHealth{}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	p.status = newProxyHealth(nil, HealthTimeout, clk.now)
	p.status.started()
	addObj(p, svcOf("10.96.0.10", sport("web", 80, corev1.ProtocolTCP, intstr.FromInt32(8080))))
	clk.step(HealthTimeout)
	if p.status.Healthy() {
		t.Fatal("healthy with a change waiting the timeout")
	}
	if _, err := p.Sync(); err == nil {
		t.Fatal("the failing add was not reported")
	}
	if p.status.Healthy() {
		t.Fatal("healthy after the sync of the waiting change failed")
	}

	hs := newHealthServers(t.Logf)
	hs.host = "127.0.0.1" // the machine's namespace: loopback only
	hs.healthy = p.status.Healthy
	defer hs.Close()
	port := serveOnFreePort(t, hs, "ns/web", 1)
	code, _, raw := healthGet2(t, fmt.Sprintf("127.0.0.1:%d", port))
	if code != 503 || raw["serviceProxyHealthy"] != false {
		t.Fatalf("healthCheckNodePort while the syncs lag: %d %v, want 503 with serviceProxyHealthy false", code, raw)
	}

	if _, err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if !p.status.Healthy() {
		t.Fatal("unhealthy after a sync applied every change")
	}
	if code, _, raw = healthGet2(t, fmt.Sprintf("127.0.0.1:%d", port)); code != 200 || raw["serviceProxyHealthy"] != true {
		t.Fatalf("healthCheckNodePort once synced: %d %v, want 200 with serviceProxyHealthy true", code, raw)
	}
}

// healthGet2 asks a healthCheckNodePort server (its body is not a
// healthReport).
func healthGet2(t *testing.T, addr string) (int, http.Header, map[string]any) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	r, err := c.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return r.StatusCode, r.Header, m
}

// The status server: /proxyMode says the proxy's mode, /healthz "ok",
// /metrics kube-proxy's metrics (metrics_test.go reads them with
// Prometheus' parser).
func TestStatusServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := serveOn(ctx, "status server", "127.0.0.1:0", statusHandler(ModeEBPF, NewMetrics(testNodeIPs).Handler()), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	c := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	for path, want := range map[string]string{"/proxyMode": ModeEBPF, "/healthz": "ok", "/metrics": "kubeproxy_sync_proxy_rules_service_changes_total 0"} {
		r, err := c.Get("http://" + a.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || !(string(b) == want || path == "/metrics" && strings.Contains(string(b), want)) {
			t.Errorf("%s: %d %.200q, want 200 %q", path, r.StatusCode, b, want)
		}
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := c.Get("http://" + a.String() + "/proxyMode"); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the status server still answers after its context ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serveOnFreePort makes h serve Service name's health on a loopback port
// that was free a moment ago, and returns the port. Another process may
// take the port in that moment: then it tries another.
func serveOnFreePort(t *testing.T, h *healthServers, name string, local int) uint16 {
	t.Helper()
	for range 5 {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := uint16(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		if err = h.Set(name, port, local); err == nil {
			return port
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatal(err)
		}
	}
	t.Fatal("no loopback port stayed free long enough to serve on, in 5 tries")
	return 0
}

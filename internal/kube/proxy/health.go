package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// healthServers are the HTTP servers of healthCheckNodePorts, one per
// Service that has one (externalTrafficPolicy Local), listening on every
// address of the node as kube-proxy's do. A load balancer asks any path:
// 200 while this node has a ready endpoint of the Service, 503 otherwise,
// with a JSON body {"service":{"namespace","name"},"localEndpoints":N,
// "serviceProxyHealthy":B} and the count in X-Load-Balancing-Endpoint-Weight;
// 503 too while the proxy's syncs lag (proxyHealth), as kube-proxy's.
type healthServers struct {
	host    string // "" = every address (the node's); tests: loopback
	logf    func(string, ...any)
	healthy func() bool // the proxy's syncs keep up (nil: always)
	mu      sync.Mutex
	m       map[string]*healthServer // by Service (namespace/name)
}

type healthServer struct {
	port  uint16
	local atomic.Int64
	srv   *http.Server
}

func newHealthServers(logf func(string, ...any)) *healthServers {
	return &healthServers{logf: logf, m: map[string]*healthServer{}}
}

// Set makes Service name's health server listen on port and report local
// endpoints (port 0: no server; a changed port: the old one stops).
func (h *healthServers) Set(name string, port uint16, local int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.m[name]; ok {
		if s.port == port {
			s.local.Store(int64(local))
			return nil
		}
		h.stop(name)
	}
	if port == 0 {
		return nil
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(h.host, strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("healthCheckNodePort %d: %w", port, err)
	}
	s := &healthServer{port: port}
	s.local.Store(int64(local))
	ns, n := splitName(name)
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		count := s.local.Load()
		healthy := h.healthy == nil || h.healthy()
		body, _ := json.Marshal(map[string]any{
			"service":             map[string]string{"namespace": ns, "name": n},
			"localEndpoints":      count,
			"serviceProxyHealthy": healthy,
		})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.FormatInt(count, 10))
		if count > 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write(body)
	})}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			h.logf("service %s: health server on %d: %v", name, port, err)
		}
	}()
	h.m[name] = s
	h.logf("service %s: health server on :%d (%d local endpoints)", name, port, local)
	return nil
}

// stop closes a Service's server (mu held).
func (h *healthServers) stop(name string) {
	s, ok := h.m[name]
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	delete(h.m, name)
	h.logf("service %s: health server on :%d stopped", name, s.port)
}

// Close stops every server.
func (h *healthServers) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name := range h.m {
		h.stop(name)
	}
}

func splitName(key string) (string, string) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return "", key
}

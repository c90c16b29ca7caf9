package labservice

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
)

// FloorSpec is `svc converge`: kube converge's changes written through a
// lab's Service transaction (Add, Edit, Del) instead of an API server, the
// floor under a cluster's network programming latency: what the data
// plane's write alone costs, per provider.
type FloorSpec struct {
	Lab      string
	Provider string        // for a lab without Services ("": the mode's default)
	VIP      netip.Addr    // the changed Service's address (DefaultFloorVIP)
	Interval time.Duration // between a prober's probes
	Pace     converge.Pace // changes and timeouts
}

// DefaultFloorVIP is the changed Service's address: in the lab's clusterIP
// range, away from what `svc add` examples and the generated Services use.
var DefaultFloorVIP = netip.MustParseAddr("10.96.47.1")

// The changed Service's ports: the probes' (before and after port-changed)
// and the backends' (vnetlab whoami).
const (
	floorPort     = 53
	floorMoved    = 54
	floorBackPort = 5353
)

// Floor measures network programming latency in lab spec.Lab: its first
// two pods answer as backends (vnetlab whoami, with their pod's name: a
// lab's pods share the machine's host name), every other pod probes the
// Service (vnetlab kube probe, a "node" of the result named by its pod),
// and converge.Cycle writes the changes. The Service is deleted and the
// processes stopped when it returns. The run is in converge's types: the
// verb files it (runner.ConvergenceOf).
func Floor(ctx context.Context, spec FloorSpec, say func(string, ...any)) (*converge.Run, error) {
	st, err := lab.Load(spec.Lab)
	if err != nil {
		return nil, err
	}
	if len(st.Pods) < 3 {
		return nil, fmt.Errorf("lab %s has %d pods: svc converge needs 3 or more (two backends and a prober; vnetlab up --pods 3)", st.Name, len(st.Pods))
	}
	if !spec.VIP.IsValid() {
		spec.VIP = DefaultFloorVIP
	}
	key := Key{VIP: spec.VIP, Port: floorPort, Proto: "udp"}
	moved := Key{VIP: spec.VIP, Port: floorMoved, Proto: "udp"}
	if c, err := Load(st.Name); err == nil {
		for _, k := range []Key{key, moved} {
			if c.Find(k) >= 0 {
				return nil, fmt.Errorf("lab %s already has Service %s: delete it (vnetlab svc del %s %s) or give another --vip", st.Name, k, st.Name, k)
			}
		}
	}
	w := &floorWriter{lab: st.Name, key: key, main: key, moved: moved, provider: spec.Provider, a: st.Pods[0], b: st.Pods[1]}
	procs, err := converge.NewLabProcs()
	if err != nil {
		return nil, err
	}
	defer procs.Stop()
	for _, pod := range []lab.PodState{w.a, w.b} {
		if err := procs.Backend(ctx, converge.PodRef{NS: pod.NS, Name: pod.Name}, floorBackPort); err != nil {
			return nil, err
		}
	}
	seen := converge.NewSeen()
	targets := converge.Targets{Main: netip.AddrPortFrom(spec.VIP, floorPort).String(), Moved: netip.AddrPortFrom(spec.VIP, floorMoved).String()}
	var probers []converge.PodRef
	for _, pod := range st.Pods[2:] {
		probers = append(probers, converge.PodRef{NS: pod.NS, Name: pod.Name})
	}
	if err := procs.Probers(ctx, probers, []string{targets.Main, targets.Moved}, spec.Pace, seen); err != nil {
		return nil, err
	}
	defer func() {
		for _, k := range []Key{key, moved} {
			if c, err := Load(st.Name); err == nil && c.Find(k) >= 0 {
				if _, err := Del(st.Name, k); err != nil {
					say("warning: deleting Service %s: %v", k, err)
				}
			}
		}
	}()
	res := spec.Pace.NewRun()
	other := converge.NewOtherMeter(lab.Measured(st.Name))
	changes, err := converge.Cycle(ctx, w, other.Hooks(), seen, spec.Pace, targets, say)
	if err != nil {
		return nil, err
	}
	res.End = time.Now()
	other.End(results.PhaseChanges)
	res.OtherWork = other.Result()
	c, err := Load(st.Name)
	if err != nil {
		return nil, err
	}
	res.Proxy = "lab provider " + c.Provider
	converge.Finish(res, changes, seen)
	return res, nil
}

// floorWriter writes the changes through the lab's Service transaction.
type floorWriter struct {
	lab, provider string
	key           Key // the Service's now: main, or moved after ChangePort
	main, moved   Key
	a, b          lab.PodState // the backends
	attached      bool         // the probers' endpoints, for a provider with programs on pods
}

func (w *floorWriter) backend(p lab.PodState) BackendSpec {
	return BackendSpec{Host: p.Name, Port: floorBackPort}
}

// Create adds the Service with the first backend (and, the first time,
// attaches the probers' endpoints when the provider needs them: before
// the write is timed).
func (w *floorWriter) Create(ctx context.Context) (int64, error) {
	at := time.Now().UnixNano()
	res, err := Add(w.lab, AddRequest{Key: w.key, Backends: []BackendSpec{w.backend(w.a)}, Provider: w.provider})
	if err != nil || w.attached || !res.NeedsEndpoints {
		return at, err
	}
	w.attached = true
	st, err := lab.Load(w.lab)
	if err != nil {
		return at, err
	}
	for _, p := range st.Pods[2:] {
		if _, err := Attach(w.lab, PodRef{Pod: p.Name}); err != nil {
			return at, err
		}
	}
	return at, nil
}

// AddEndpoint adds the second backend.
func (w *floorWriter) AddEndpoint(ctx context.Context) (int64, error) {
	at := time.Now().UnixNano()
	_, err := Add(w.lab, AddRequest{Key: w.key, Backends: []BackendSpec{w.backend(w.b)}})
	return at, err
}

// RemoveEndpoint takes the second backend out (an update in place).
func (w *floorWriter) RemoveEndpoint(ctx context.Context) (int64, error) {
	at := time.Now().UnixNano()
	_, err := Edit(w.lab, func(_ *lab.State, c *Config) (string, error) {
		i := c.Find(w.key)
		if i < 0 {
			return "", fmt.Errorf("service %s is gone", w.key)
		}
		c.Services[i].Backends = slices.DeleteFunc(c.Services[i].Backends, func(b Backend) bool { return b.Pod == w.b.Name })
		return fmt.Sprintf("service %s: backend %s removed", w.key, w.b.Name), nil
	})
	return at, err
}

// ChangePort moves the Service to its second port (an update in place:
// one transaction).
func (w *floorWriter) ChangePort(ctx context.Context) (int64, error) {
	at := time.Now().UnixNano()
	_, err := Edit(w.lab, func(_ *lab.State, c *Config) (string, error) {
		i := c.Find(w.key)
		if i < 0 {
			return "", fmt.Errorf("service %s is gone", w.key)
		}
		c.Services[i].Port = w.moved.Port
		return fmt.Sprintf("service %s: port now %d", w.key, w.moved.Port), nil
	})
	if err == nil {
		w.key = w.moved
	}
	return at, err
}

// Delete deletes the Service (the next creation is at its first port).
func (w *floorWriter) Delete(ctx context.Context) (int64, error) {
	at := time.Now().UnixNano()
	_, err := Del(w.lab, w.key)
	if err == nil {
		w.key = w.main
	}
	return at, err
}

// Second is the backend added and removed.
func (w *floorWriter) Second() string { return w.b.Name }

package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// What one extra Service costs the API server and etcd together in
// resident memory: a Service with its EndpointSlice (measured: 16.1 KB
// each from 1,000 to 10,000 Services of one endpoint on a local cluster,
// 32.5-46 KB in later runs and 36.2 KB at 30,000: kube converge's
// api_bytes_per_service, docs/kubernetes-converge.md; the larger is used), and each
// endpoint more (measured: Services of 10 endpoints took 47.2-48.3 KB each
// from 1,000 to 10,000, those of one 40.2-42.0 KB from 0 to 10,000: about
// 0.7-0.9 KB an endpoint; rounded up). The check before creating N uses
// them. etcd's files are in memory too (a local cluster keeps them on
// tmpfs): its write-ahead log and its database grew 5.2 KB per Service
// (26.2 MB from 0 to 5,000 Services of one endpoint), of which the RSS
// above counts only the database's pages etcd touched; rounded up. Its
// log's first two 64 MB segments are written when the cluster starts, so
// they are already outside the available memory checked against.
const (
	apiBytesPerService  = 46<<10 + etcdFileBytesPerService
	apiBytesPerEndpoint = 1 << 10

	etcdFileBytesPerService = 6 << 10
	// memoryShare is how much of the machine's available memory the
	// estimate may take: the nodes, their pods and the proxies need the rest.
	memoryShare = 0.7
)

// estimateAPIBytes is what n Services of eps endpoints add to the API
// server and etcd.
func estimateAPIBytes(n, eps int) int64 {
	return int64(n) * (apiBytesPerService + int64(eps)*apiBytesPerEndpoint)
}

// memAvailable is the machine's MemAvailable (/proc/meminfo), in bytes.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no MemAvailable in /proc/meminfo")
}

// checkFits refuses, before anything is created, N Services a local
// cluster's API server and etcd (on this machine) cannot hold: the
// estimate, what is available and the largest N that fits.
func checkFits(n, eps int, avail int64) error {
	need := estimateAPIBytes(n, eps)
	room := int64(float64(avail) * memoryShare)
	if need <= room {
		return nil
	}
	fits := room / estimateAPIBytes(1, eps)
	return fmt.Errorf("--extra-services %d with %d endpoints each: the API server and etcd would need about %.1f GB more (%.1f KB per Service, from what a local cluster took here), and %.0f%% of the %.1f GB available is %.1f GB: use at most %d, or free memory",
		n, eps, gb(need), float64(estimateAPIBytes(1, eps))/1024, memoryShare*100, gb(avail), gb(room), fits)
}

func gb(b int64) float64 { return float64(b) / (1 << 30) }

// usageMeter measures a local cluster's daemons phase by phase: CPU time
// from the phase's start, resident memory at its end and its peak; and
// the machine's other work beside them (converge.OtherMeter).
type usageMeter struct {
	daemons []cluster.Daemon
	other   *converge.OtherMeter
	mu      sync.Mutex
	start   map[int]cpu.ProcUsage
	peak    map[int]int64
	t0      time.Time
	quit    chan struct{}
	done    sync.WaitGroup
	running bool
}

func newUsageMeter(name string) (*usageMeter, error) {
	ds, err := cluster.Daemons(name)
	if err != nil {
		return nil, err
	}
	return &usageMeter{daemons: ds, other: converge.NewOtherMeter(otherThan(name))}, nil
}

// otherThan is what a local cluster's other work leaves out: its
// processes and vnetlab's (lab.Measured), and its nodes' cgroups (its pods).
func otherThan(name string) cpu.Measured {
	m := lab.Measured(name)
	if st, err := cluster.Load(name); err == nil {
		for _, n := range st.Nodes {
			m.Cgroups = append(m.Cgroups, cluster.NodeCgroupPath(n.Name))
		}
	}
	return m
}

// begin starts a phase.
func (m *usageMeter) begin() {
	m.mu.Lock()
	m.start, m.peak, m.t0 = map[int]cpu.ProcUsage{}, map[int]int64{}, time.Now()
	for _, d := range m.daemons {
		if u, err := cpu.OfProcess(d.PID); err == nil {
			m.start[d.PID], m.peak[d.PID] = u, u.RSS
		}
	}
	m.other.Begin()
	m.mu.Unlock()
	m.quit, m.running = make(chan struct{}), true
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.quit:
				return
			case now := <-t.C:
				m.mu.Lock()
				for _, d := range m.daemons {
					if u, err := cpu.OfProcess(d.PID); err == nil {
						m.peak[d.PID] = max(m.peak[d.PID], u.RSS)
					}
				}
				m.other.Tick(now)
				m.mu.Unlock()
			}
		}
	}()
}

// end ends the phase and returns each daemon's use in it.
func (m *usageMeter) end(phase string) []converge.DaemonUse {
	if !m.running {
		return nil
	}
	m.running = false
	close(m.quit)
	m.done.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	if phase != "" {
		m.other.End(phase)
	}
	secs := time.Since(m.t0).Seconds()
	var out []converge.DaemonUse
	for _, d := range m.daemons {
		u, err := cpu.OfProcess(d.PID)
		s, ok := m.start[d.PID]
		if err != nil || !ok {
			continue
		}
		out = append(out, converge.DaemonUse{Daemon: d.Name(), Phase: phase, Seconds: secs, CPUSeconds: (u.CPU - s.CPU).Seconds(),
			RSS: u.RSS, PeakRSS: max(m.peak[d.PID], u.RSS)})
	}
	return out
}

// apiRSS is the API server's and etcd's resident memory now.
func (m *usageMeter) apiRSS() int64 {
	var sum int64
	for _, d := range m.daemons {
		if d.Role == cluster.RoleEtcd || d.Role == cluster.RoleAPIServer {
			if u, err := cpu.OfProcess(d.PID); err == nil {
				sum += u.RSS
			}
		}
	}
	return sum
}

// stop ends a phase left running (a run that failed).
func (m *usageMeter) stop() { _ = m.end("") }

// background makes spec's N Services (kept for reuse with --keep-extra),
// measuring a local cluster's daemons while it does (meter nil: another
// cluster). The returned cleanup deletes them unless kept.
func background(ctx context.Context, spec ConvergeSpec, cfg *rest.Config, meter *usageMeter, sc *converge.Scale, say func(string, ...any)) (func(), error) {
	if meter != nil {
		meter.begin()
	}
	if spec.ExtraServices == 0 && !spec.KeepExtra {
		return func() {}, nil // (with --keep-extra, a kept set is emptied)
	}
	var rssBefore int64
	if meter != nil {
		rssBefore = meter.apiRSS()
	}
	var extra *measure.Extra
	var err error
	if spec.KeepExtra {
		extra, err = measure.KeptExtraServices(ctx, cfg, spec.ExtraServices, spec.ExtraEndpoints, say)
	} else {
		extra, err = measure.CreateExtraServices(ctx, cfg, spec.ExtraServices, spec.ExtraEndpoints, say)
	}
	if err != nil {
		return nil, err
	}
	sc.Reused, sc.CreateSeconds = extra.Reused, extra.Took.Seconds()
	made := extra.Count - extra.Reused
	say("converge: %d extra Services with %d endpoints each (%d reused, %d created in %s)", extra.Count, extra.Endpoints, extra.Reused, made, extra.Took.Round(time.Second))
	if meter != nil && made > 0 {
		sc.APIBytesPerService = float64(meter.apiRSS()-rssBefore) / float64(made)
	}
	return func() {
		if spec.KeepExtra {
			say("converge: the %d extra Services stay in namespace %s for the next run (vnetlab kube clean removes them)", extra.Count, extra.Namespace)
			return
		}
		if _, err := extra.Delete(say); err != nil {
			say("warning: deleting the extra Services: %v (run `vnetlab kube clean`)", err)
		}
	}, nil
}

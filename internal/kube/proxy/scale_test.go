package proxy_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
)

// The sync latency with many Services present: VNETLAB_PROXY_SCALE=1000,10000
// creates Services through the API up to each count (selectorless, no
// endpoints: each is one entry without backends in every node's maps), waits
// until node 1's proxy has them all, then measures newServiceLatency five
// times. Opt-in: 10k Services take a while to create.
func TestSyncLatencyAtScale(t *testing.T) {
	spec := os.Getenv("VNETLAB_PROXY_SCALE")
	if spec == "" {
		t.Skip("set VNETLAB_PROXY_SCALE=1000,10000 to measure the sync latency with that many Services")
	}
	var counts []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			t.Fatalf("VNETLAB_PROXY_SCALE=%s: want counts like 1000,10000", spec)
		}
		counts = append(counts, n)
	}
	cs := needCluster(t)
	fast := fastClient(t)
	ns := kns(t, cs)
	bulk := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, nil), clientPod("cli", 1))
	cli := podNetns(t, ips["cli"])
	p1 := plane(t, 1)
	base, err := p1.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	made := 0
	for _, n := range append([]int{0}, counts...) {
		if n > made {
			took, err := createServices(fast, bulk, made, n)
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			for ss, _ := p1.ListServices(); len(ss) < len(base)+n; ss, _ = p1.ListServices() {
				if time.Since(t0) > 5*time.Minute {
					t.Fatalf("node 1's maps hold %d entries, want %d", len(ss), len(base)+n)
				}
				time.Sleep(250 * time.Millisecond)
			}
			t.Logf("created Services %d..%d through the API in %s (%.0f/s); node 1's maps had them %s after the last create", made, n, took.Round(10*time.Millisecond),
				float64(n-made)/took.Seconds(), time.Since(t0).Round(10*time.Millisecond))
			made = n
		}
		var lats []time.Duration
		for i := 0; i < 5; i++ {
			lat, err := newServiceLatency(cs, ns, fmt.Sprintf("probe-%d-%d", n, i), ips["srv"], cli)
			if err != nil {
				t.Fatal(err)
			}
			lats = append(lats, lat)
		}
		slices.Sort(lats)
		t.Logf("with %d Services present: EndpointSlice created -> traffic follows: median %s, min %s, max %s", n+len(base)+5, lats[2].Round(100*time.Microsecond),
			lats[0].Round(100*time.Microsecond), lats[4].Round(100*time.Microsecond))
	}
}

// fastClient lifts client-go's default rate limit (5 requests/s).
func fastClient(t *testing.T) kubernetes.Interface {
	cfg, err := clientcmd.BuildConfigFromFlags("", upState.Facts[cluster.FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// createServices creates Services from..to-1 with 32 requests in flight.
func createServices(cs kubernetes.Interface, ns string, from, to int) (time.Duration, error) {
	start := time.Now()
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= to {
					return
				}
				_, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bulk-%d", i)},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}, metav1.CreateOptions{})
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), firstErr
}

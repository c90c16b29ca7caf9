package proxy_test

// Tests on a real local cluster whose nodes run `vnetlab kube-proxy`
// (kube up --proxy vnetlab-ebpf, then vnetlab-sock): real pods, traffic from
// a client pod's network namespace to a Service's clusterIP, answered by
// whoami backends that say which pod served. The cluster comes up on the
// first test that needs it; a test that needs the other proxy takes it down
// (checking nothing is left) and brings it up with that one (the tests of
// sock_cluster_test.go run last, so the package brings up two clusters);
// the last goes down in TestMain, which checks again.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/proxy"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// testCluster is the cluster up: its name says its proxy (clusterNames).
var testCluster = "vkp"

var clusterNames = map[string]string{proxy.ModeEBPF: "vkp", proxy.ModeSock: "vks", modeSocketLB: "vkl", modeDual: "vk6"}

// needProxy's names for --proxy vnetlab-ebpf --socket-lb, and for
// --proxy vnetlab-ebpf --ip-family dual (v6dual_cluster_test.go: its file
// name sorts after the other clusters' tests, so that each cluster comes
// up once).
const (
	modeSocketLB = proxy.ModeEBPF + "+socket-lb"
	modeDual     = proxy.ModeEBPF + "+dual"
)

// inPodCgroup: the proxy of the cluster up has socket programs acting on
// the pods' sockets, so a question must come from a process in a pod's
// cgroup (who).
func inPodCgroup() bool { return upProxy == proxy.ModeSock || upProxy == modeSocketLB }

var (
	upMu    sync.Mutex
	upProxy string // the proxy of the cluster up (or that failed to come up)
	upErr   error
	upState *lab.State
	upHold  *lab.Lab
	upTook  time.Duration
	skipWhy string
	// rootCloseWait is the root namespace's CLOSE_WAIT timeout before any
	// cluster (TestNodesCloseWaitTimeout).
	rootCloseWait string
	testCtx       = context.Background()
	nodeName      = func(i int) string { return cluster.NodeName(testCluster, i) }
)

func TestMain(m *testing.M) {
	if w := strings.Fields(os.Getenv(whoEnv)); len(w) == 3 {
		os.Exit(whoChild(w[0], w[1], w[2]))
	}
	switch {
	case os.Geteuid() != 0:
		skipWhy = "a local cluster needs root (namespaces, containers)"
	case os.Getenv("VNETLAB_BIN") == "":
		skipWhy = "a local cluster puts vnetlab in its image and runs it as the proxy: set VNETLAB_BIN to a built vnetlab (make test does)"
	}
	if skipWhy == "" {
		if err := testnet.CheckTimeout(20*time.Minute, "its first cluster's bring-up builds Kubernetes, ~7 minutes on 2 cores, and its four clusters' tests take ~4 more"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	rootCloseWait, _ = nsutil.CurrentSysctl("net.netfilter.nf_conntrack_tcp_timeout_close_wait")
	code := m.Run()
	if err := downCluster(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// downCluster takes the cluster down (if up) and says what it left.
func downCluster() error {
	if upState == nil {
		return nil
	}
	links := nodeCgroupLinks()
	if upHold != nil {
		upHold.Release()
	}
	start := time.Now()
	err := cluster.Down(testCluster, nil)
	fmt.Fprintf(os.Stderr, "cluster %s (--proxy %s): up in %s, down in %s\n", testCluster, upProxy, upTook.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	left := cluster.Leftovers(upState, nil)
	for _, id := range links {
		if l, err := link.NewFromID(id); err == nil {
			l.Close()
			left += fmt.Sprintf("; bpf link %d (socket program on a node's cgroup)", id)
		}
	}
	upState, upHold = nil, nil
	if err != nil {
		return fmt.Errorf("kube down: %w", err)
	}
	if left != "" {
		return fmt.Errorf("kube down left: %s", strings.TrimPrefix(left, "; "))
	}
	return nil
}

// needCluster brings the cluster up with vnetlab-ebpf and returns a client.
func needCluster(t *testing.T) kubernetes.Interface { return needProxy(t, proxy.ModeEBPF) }

// needProxy brings the cluster up with --proxy mode (taking down one with
// another proxy first) and returns a client.
func needProxy(t *testing.T, mode string) kubernetes.Interface {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	upMu.Lock()
	if upProxy != mode {
		if err := downCluster(); err != nil {
			upMu.Unlock()
			t.Fatal(err)
		}
		upProxy, testCluster = mode, clusterNames[mode]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		start := time.Now()
		spec := cluster.Spec{Name: testCluster, Nodes: 2, Proxy: mode}
		switch mode {
		case proxy.ModeSock:
			spec.Family = family.Dual // IPv4 first: its tests' Services are IPv4; ipv6ThroughSockets adds IPv6 ones
		case modeSocketLB:
			// A zone per node: topology-aware routing in both planes
			// (TestTopologyInBothPlanes).
			spec.Proxy, spec.SocketLB, spec.Family, spec.Zones = proxy.ModeEBPF, true, family.Dual, 2
		case modeDual:
			spec.Proxy, spec.Family = proxy.ModeEBPF, family.Dual
		}
		upState, upErr = cluster.Up(ctx, spec, t.Logf)
		cancel()
		upTook = time.Since(start)
		if upErr == nil {
			// Held while the tests run: a `vnetlab clean` elsewhere skips it;
			// also the journal the restarted API server goes into.
			upHold, upErr = lab.Open(testCluster)
		}
	}
	upMu.Unlock()
	if upErr != nil {
		t.Fatalf("kube up --proxy %s: %v", mode, upErr)
	}
	cs, err := cluster.Client(upState.Facts[cluster.FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// kns makes a Kubernetes namespace for one test, deleted at its end.
func kns(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(testCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "vkp-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Pods need the namespace's default ServiceAccount, which the
	// controller-manager adds a moment later.
	if err := waitFor(time.Minute, func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(testCtx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		t.Fatalf("namespace %s never got its default ServiceAccount", ns.Name)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.CoreV1().Pods(ns.Name).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// whoamiPod is a backend on node i answering TCP 8080 (named "http"), 8081
// and UDP 5353 with its name; clientPod an idle pod (the image's pause).
func whoamiPod(name string, node int, labels map[string]string) *corev1.Pod {
	p := clientPod(name, node)
	p.Labels = labels
	c := &p.Spec.Containers[0]
	c.Command = []string{"/usr/bin/vnetlab", "whoami", "--tcp", "8080", "--tcp", "8081", "--udp", "5353"}
	c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "alt", ContainerPort: 8081}, {Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP}}
	return p
}

func clientPod(name string, node int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": nodeName(node)},
			TerminationGracePeriodSeconds: new(int64),
			Containers:                    []corev1.Container{{Name: "c", Image: upState.Facts[cluster.FactImage], ImagePullPolicy: corev1.PullNever}}}}
}

// runPods creates pods and waits until they are Ready; returns their IPs.
func runPods(t *testing.T, cs kubernetes.Interface, ns string, pods ...*corev1.Pod) map[string]string {
	t.Helper()
	for _, p := range pods {
		if _, err := cs.CoreV1().Pods(ns).Create(testCtx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	err := waitFor(2*time.Minute, func() bool {
		for _, p := range pods {
			got, err := cs.CoreV1().Pods(ns).Get(testCtx, p.Name, metav1.GetOptions{})
			if err != nil || got.Status.PodIP == "" || !podReady(got) {
				return false
			}
			ips[p.Name] = got.Status.PodIP
		}
		return true
	})
	if err != nil {
		t.Fatalf("pods not Ready: %v", err)
	}
	return ips
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func waitFor(limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s", limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// podNetns finds the network namespace holding a pod address (each node's
// containerd keeps its pods' namespaces under its state directory).
func podNetns(t *testing.T, ip string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(lab.Dir(testCluster), "*", "containerd", "state", "*", "netns", "*"))
	want := netip.MustParseAddr(ip)
	for _, p := range paths {
		found := false
		_ = nsutil.DoPath(p, func() error {
			addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
			for _, a := range addrs {
				if got, ok := netip.AddrFromSlice(a.IP.To4()); ok && got == want {
					found = true
				}
			}
			return err
		})
		if found {
			return p
		}
	}
	t.Fatalf("no pod network namespace holds %s", ip)
	return ""
}

// who asks addr (tcp or udp) from a pod's namespace ns which pod answers.
// With socket programs acting on pods (inPodCgroup) the question comes
// from a process in the pod's cgroup (whoIn); else from this process's
// thread in the namespace.
func who(ns, proto, addr string) (string, error) { return whoFrom(ns, proto, addr, 0) }

// whoFrom is who from local port lport (0: any), as `nc -p` does: every
// question a new socket, the same flow for a conntrack.
func whoFrom(ns, proto, addr string, lport int) (string, error) {
	if inPodCgroup() && ns != outside() {
		cg, err := cgroup.PodOf(ns)
		if err != nil {
			return "", err
		}
		return whoIn(ns, cg, proto, addr, lport)
	}
	var out string
	err := nsutil.DoPath(ns, func() error {
		var err error
		out, err = askFrom(proto, addr, lport)
		return err
	})
	return out, err
}

// ask connects to addr (tcp or udp: a connected socket), sends a datagram
// if udp, and returns the answer.
func ask(proto, addr string) (string, error) { return askFrom(proto, addr, 0) }

// askFrom is ask from local port lport (0: any).
func askFrom(proto, addr string, lport int) (string, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	if lport != 0 {
		if proto == "udp" {
			d.LocalAddr = &net.UDPAddr{Port: lport}
		} else {
			d.LocalAddr = &net.TCPAddr{Port: lport}
		}
	}
	c, err := d.Dial(proto, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if proto == "udp" {
		if _, err := c.Write([]byte("?")); err != nil {
			return "", err
		}
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	return strings.TrimSpace(string(buf[:n])), err
}

// mustWho waits (up to limit) until addr is answered by want.
func mustWho(t *testing.T, ns, proto, addr, want string, limit time.Duration) {
	t.Helper()
	var got string
	var err error
	if waitFor(limit, func() bool { got, err = who(ns, proto, addr); return err == nil && got == want }) != nil {
		t.Fatalf("%s %s from %s: answered %q (%v), want %q", proto, addr, ns, got, err, want)
	}
}

// plane opens node i's Service maps (pinned by its proxy).
func plane(t *testing.T, node int) *tcbpf.Plane {
	t.Helper()
	p, err := tcbpf.Open(cluster.ProxyPlane(testCluster, nodeName(node)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func entry(t *testing.T, p *tcbpf.Plane, vip string, port uint16, proto tcbpf.Proto) (tcbpf.Service, bool) {
	t.Helper()
	ss, err := p.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.VIP.String() == vip && s.Port == port && s.Proto == proto {
			return s, true
		}
	}
	return tcbpf.Service{}, false
}

func nodeNS(i int) string { return lab.NSName(testCluster, fmt.Sprintf("node%d", i)) }

func hostport(ip string, port int) string { return net.JoinHostPort(ip, fmt.Sprint(port)) }

// ClusterIP, TCP and UDP on one port number, a second port, a named
// targetPort; cross-node (client on node 1, backend on node 2) and
// same-node; and proof it was vnetlab's eBPF and not kube-proxy: no
// kube-proxy process or rules in the nodes, the entries in the node's maps,
// its DNAT counter rising.
func TestClusterIPThroughEBPF(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, map[string]string{"app": "srv"}), clientPod("cli1", 1), clientPod("cli2", 2))
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "srv"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "srv"}, Ports: []corev1.ServicePort{
			{Name: "web", Port: 80, TargetPort: intstr.FromString("http")},
			{Name: "web-udp", Port: 80, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")},
			{Name: "alt", Port: 81, TargetPort: intstr.FromInt32(8081)},
		}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vip := svc.Spec.ClusterIP
	p1 := plane(t, 1)
	before, err := p1.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for i, cli := range []string{"cli1", "cli2"} {
		ns := podNetns(t, ips[cli])
		mustWho(t, ns, "tcp", hostport(vip, 80), "srv", 10*time.Second)
		mustWho(t, ns, "udp", hostport(vip, 80), "srv", 10*time.Second)
		mustWho(t, ns, "tcp", hostport(vip, 81), "srv", 10*time.Second)
		// The pod's own address is not a clusterIP: 8080 is there, 80 is not.
		if _, err := who(ns, "tcp", hostport(vip, 8080)); err == nil {
			t.Errorf("client %d: %s:8080 answered: only the Service's ports may be translated", i+1, vip)
		}
	}
	srvIP := netip.MustParseAddr(ips["srv"])
	for _, e := range []struct {
		port   uint16
		proto  tcbpf.Proto
		target uint16
	}{{80, tcbpf.TCP, 8080}, {80, tcbpf.UDP, 5353}, {81, tcbpf.TCP, 8081}} {
		for node := 1; node <= 2; node++ {
			s, ok := entry(t, plane(t, node), vip, e.port, e.proto)
			if !ok || len(s.Backends) != 1 || s.Backends[0] != (tcbpf.Backend{IP: srvIP, Port: e.target}) {
				t.Errorf("node %d's maps: %s:%d/%s = %v (present %v), want backend %s:%d", node, vip, e.port, e.proto, s.Backends, ok, srvIP, e.target)
			}
		}
	}
	after, err := p1.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.DNAT < before.DNAT+3 || after.RNAT <= before.RNAT {
		t.Errorf("node 1's programs translated %d packets and %d replies during the test: the clusterIP did not go through them", after.DNAT-before.DNAT, after.RNAT-before.RNAT)
	}
	noKubeProxy(t, vip)
}

// noKubeProxy fails unless the nodes have no kube-proxy rule (none naming
// vip either) and no kube-proxy runs for the cluster.
func noKubeProxy(t *testing.T, vip string) {
	t.Helper()
	for node := 1; node <= 2; node++ {
		for _, argv := range [][]string{{"iptables-save"}, {"nft", "list", "ruleset"}} {
			out, err := proc.Command(testCtx, nodeNS(node), argv[0], argv[1:]...).Output()
			if err != nil {
				t.Fatalf("%s in node %d: %v", argv[0], node, err)
			}
			if strings.Contains(string(out), "KUBE-SERVICES") || strings.Contains(string(out), "table ip kube-proxy") || strings.Contains(string(out), vip) {
				t.Errorf("node %d has kube-proxy rules (%s):\n%s", node, argv[0], out)
			}
		}
	}
	for _, pid := range cluster.ProcessesMentioning("kube-proxy.yaml") {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), lab.Dir(testCluster)) {
			t.Errorf("a kube-proxy runs for the cluster (pid %d)", pid)
		}
	}
}

// Two backends; one leaves the Service (its label removed, as a rollout
// or a failing readiness does): new connections go to the other only,
// and when it comes back, to both again.
func TestEndpointRemovedTrafficMoves(t *testing.T) { endpointRemovedTrafficMoves(t, needCluster(t)) }

func endpointRemovedTrafficMoves(t *testing.T, cs kubernetes.Interface) {
	ns := kns(t, cs)
	lbl := map[string]string{"app": "pair"}
	ips := runPods(t, cs, ns, whoamiPod("srv-a", 2, lbl), whoamiPod("srv-b", 1, lbl), clientPod("cli", 1))
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "pair"},
		Spec: corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cli := podNetns(t, ips["cli"])
	addr := hostport(svc.Spec.ClusterIP, 80)
	answers := func(n int) map[string]int {
		seen := map[string]int{}
		for i := 0; i < n; i++ {
			w, err := who(cli, "tcp", addr)
			if err != nil {
				w = "error: " + err.Error()
			}
			seen[w]++
		}
		return seen
	}
	both := func() bool { s := answers(20); return s["srv-a"] > 0 && s["srv-b"] > 0 && s["srv-a"]+s["srv-b"] == 20 }
	if err := waitFor(30*time.Second, both); err != nil {
		t.Fatalf("both backends never answered: %v", answers(20))
	}
	patch := []byte(`{"metadata":{"labels":{"app":"gone"}}}`)
	start := time.Now()
	if _, err := cs.CoreV1().Pods(ns).Patch(testCtx, "srv-a", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// Moved: inARow connections in a row on srv-b. While srv-a still
	// serves, a poll passes by chance with odds of 2^-inARow. With 10 (1 in
	// 1,024), a removal that takes seconds on a loaded machine gives that
	// chance hundreds of times, and the check after it would see srv-a.
	const inARow = 30
	if err := waitFor(10*time.Second, func() bool { s := answers(inARow); return s["srv-b"] == inARow }); err != nil {
		t.Fatalf("srv-b never answered alone: %v", answers(20))
	}
	moved := time.Since(start)
	if s := answers(30); s["srv-b"] != 30 {
		t.Fatalf("after srv-a left the Service: %v, want srv-b only", s)
	}
	t.Logf("endpoint removed through the API -> %d connections in a row on the remaining endpoint within %s", inARow, moved.Round(time.Millisecond))
	patch = []byte(`{"metadata":{"labels":{"app":"pair"}}}`)
	if _, err := cs.CoreV1().Pods(ns).Patch(testCtx, "srv-a", "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(30*time.Second, both); err != nil {
		t.Fatalf("srv-a never came back: %v", answers(20))
	}
}

// A Service and EndpointSlice created through the API are followed by
// traffic within the sync latency (here with the few Services of a fresh
// cluster; scale_test.go measures with 1k and 10k).
func TestNewServiceFollowsQuickly(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, nil), clientPod("cli", 1))
	cli := podNetns(t, ips["cli"])
	lat, err := newServiceLatency(cs, ns, "fresh", ips["srv"], cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("EndpointSlice created -> traffic follows: %s", lat.Round(100*time.Microsecond))
	if lat > 2*time.Second {
		t.Errorf("a new Service took %s to carry traffic", lat)
	}
}

// newServiceLatency creates a selectorless Service, then its EndpointSlice
// (backend ip, UDP 5353 and TCP 8080), and returns the time from the
// slice's create call to the first answer through the clusterIP: a UDP
// datagram from a fresh socket every millisecond, each answer stamped
// with its send time (the first answered send bounds the latency to 1 ms).
func newServiceLatency(cs kubernetes.Interface, ns, name, ip, cli string) (time.Duration, error) {
	svc, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "u", Port: 53, Protocol: corev1.ProtocolUDP}, {Name: "t", Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	addr := &net.UDPAddr{IP: net.ParseIP(svc.Spec.ClusterIP), Port: 53}
	ctx, cancel := context.WithTimeout(testCtx, 10*time.Second)
	defer cancel()
	first := make(chan time.Time, 1)
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for ctx.Err() == nil {
			<-tick.C
			var c *net.UDPConn
			if nsutil.DoPath(cli, func() error { var err error; c, err = net.ListenUDP("udp4", nil); return err }) != nil {
				continue
			}
			sent := time.Now()
			_, _ = c.WriteToUDP([]byte("?"), addr)
			go func() {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
				buf := make([]byte, 64)
				if _, _, err := c.ReadFromUDP(buf); err == nil {
					select {
					case first <- sent:
					default:
					}
				}
			}()
		}
	}()
	time.Sleep(50 * time.Millisecond) // probes before the change are lost
	u, t8080 := "u", "t"
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	p53, p80 := int32(5353), int32(8080)
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &u, Protocol: &udp, Port: &p53}, {Name: &t8080, Protocol: &tcp, Port: &p80}}}
	start := time.Now()
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(testCtx, es, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	select {
	case sent := <-first:
		return max(sent.Sub(start), 0), nil
	case <-ctx.Done():
		return 0, errors.New("no answer through " + addr.String() + " within 10s")
	}
}

// The API server is stopped and started again: the maps keep serving while
// it is away, and the proxy's informers relist and follow changes made
// after it is back (a new Service works, a deleted one is gone).
func TestProxyResyncsAfterAPIServerRestart(t *testing.T) {
	cs := needCluster(t)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, map[string]string{"app": "r"}), clientPod("cli", 1))
	cli := podNetns(t, ips["cli"])
	mk := func(name string) *corev1.Service {
		s, err := cs.CoreV1().Services(ns).Create(testCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "r"}, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	old := mk("old")
	mustWho(t, cli, "tcp", hostport(old.Spec.ClusterIP, 80), "srv", 10*time.Second)

	pid, argv := apiServer(t)
	start, _ := proc.StartTime(pid)
	proc.Stop(pid, start, 5*time.Second)
	// Stop returns once it is a zombie; kube up's process (this one) reaps it.
	if waitFor(10*time.Second, func() bool { return !proc.Alive(pid, start) }) != nil {
		t.Fatal("the API server did not stop")
	}
	down := time.Now()
	if _, err := cs.CoreV1().Services(ns).List(testCtx, metav1.ListOptions{}); err == nil {
		t.Fatal("the API server still answers")
	}
	mustWho(t, cli, "tcp", hostport(old.Spec.ClusterIP, 80), "srv", time.Second) // the maps serve on
	time.Sleep(2 * time.Second)                                                  // the proxies' watches fail and retry

	logf, err := os.OpenFile(filepath.Join(lab.Dir(testCluster), "logs", "kube-apiserver.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := proc.Command(context.Background(), upState.Ext, argv[0], argv[1:]...)
	c.Stdout, c.Stderr = logf, logf
	c.Detach()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	logf.Close()
	go c.Wait()
	if err := upHold.TrackProc(c.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(time.Minute, func() bool {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(testCtx)
		return err == nil
	}); err != nil {
		t.Fatal("the restarted API server never became ready")
	}
	t.Logf("API server away %s", time.Since(down).Round(100*time.Millisecond))
	if err := cs.CoreV1().Services(ns).Delete(testCtx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The proxies' and the EndpointSlice controller's watches come back on
	// client-go's backoff (doubling from 0.8 s, jittered up to twice that):
	// after 14 s away their next try can be half a minute off, one after the other.
	fresh := mk("fresh")
	mustWho(t, cli, "tcp", hostport(fresh.Spec.ClusterIP, 80), "srv", 2*time.Minute)
	p1 := plane(t, 1)
	if err := waitFor(2*time.Minute, func() bool { _, ok := entry(t, p1, old.Spec.ClusterIP, 80, tcbpf.TCP); return !ok }); err != nil {
		t.Errorf("the Service deleted after the restart is still in node 1's maps")
	}
}

// apiServer finds the cluster's kube-apiserver and its command line.
func apiServer(t *testing.T) (int, []string) {
	t.Helper()
	for _, pid := range cluster.ProcessesMentioning(lab.Dir(testCluster)) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(argv[0]) == "kube-apiserver" {
			return pid, argv
		}
	}
	t.Fatal("no kube-apiserver process for the cluster")
	return 0, nil
}

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// One 2-node cluster serves every test of this package (bringing one up
// takes seconds with the binaries cached, about 10 minutes the first time).
const testCluster = "vkt"

var (
	testState *lab.State
	skipWhy   string
)

func TestMain(m *testing.M) {
	if how := os.Getenv(switchWhoEnv); how != "" {
		os.Exit(switchWhoChild(how)) // a client TestProxySwitch starts in a pod
	}
	switch {
	case os.Geteuid() != 0:
		skipWhy = "a local cluster needs root (namespaces, containers)"
	case os.Getenv("VNETLAB_BIN") == "":
		skipWhy = "a local cluster runs `vnetlab kube forward` and puts vnetlab in its image: set VNETLAB_BIN to a built vnetlab (make test does)"
	}
	if skipWhy != "" {
		os.Exit(m.Run())
	}
	if err := testnet.CheckTimeout(20*time.Minute, "its cluster's first bring-up builds Kubernetes, ~7 minutes on 2 cores, and the tests take ~6 more"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	before := MachineState()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	st, err := Up(ctx, Spec{Name: testCluster, Nodes: 2, Proxy: "iptables"}, func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) })
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube up: %v\n", err)
		os.Exit(1)
	}
	testState = st
	// Held while the tests run: a `vnetlab clean` in a test skips this
	// cluster. Shared, as kube converge holds it (cluster.Hold): the
	// tests' own converge runs hold it beside.
	hold, err := lab.OpenShared(testCluster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lock cluster: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	hold.Release()
	if err := Down(testCluster, nil); err != nil {
		fmt.Fprintf(os.Stderr, "kube down: %v\n", err)
		code = 1
	}
	if msg := Leftovers(st, before); msg != "" {
		fmt.Fprintf(os.Stderr, "kube down left: %s\n", msg)
		code = 1
	}
	os.Exit(code)
}

func needCluster(t *testing.T) kubernetes.Interface {
	t.Helper()
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
	cs, err := Client(testState.Facts[FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestNodesReadyThroughForwarder(t *testing.T) {
	cs := needCluster(t)
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 2 || readyNodes(context.Background(), cs) != 2 {
		t.Fatalf("want 2 Ready nodes through %s, got %d nodes", testState.Facts[FactServer], len(nodes.Items))
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil || v.GitVersion != testState.Facts[FactVersion] {
		t.Errorf("server version %v (%v), want %s", v, err, testState.Facts[FactVersion])
	}
}

// A server pod on node 2 answers a connection from node 1's namespace on its
// pod IP (cross-node routing) and through a ClusterIP Service (kube-proxy),
// and conntrack in node 1 shows the Service's translation.
func TestPodAndServiceReachable(t *testing.T) {
	cs := needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "vkt-test-"}}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	server := testState.Nodes[1].Name
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "srv", Labels: map[string]string{"app": "srv"}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": server},
			Containers: []corev1.Container{{Name: "iperf3", Image: testState.Facts[FactImage], ImagePullPolicy: corev1.PullNever,
				Command: []string{"/usr/bin/iperf3", "-s", "-p", "5201"}}}}}
	if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "srv"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "srv"},
		Ports: []corev1.ServicePort{{Port: 5201, TargetPort: intstr.FromInt32(5201)}}}}
	svc, err = cs.CoreV1().Services(ns.Name).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var running *corev1.Pod
	if err := waitFor(ctx, 2*time.Minute, "the server pod to run", func() bool {
		p, err := cs.CoreV1().Pods(ns.Name).Get(ctx, "srv", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			running = p
			return true
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if running.Spec.NodeName != server || !podCIDR(2).Contains(net.ParseIP(running.Status.PodIP)) {
		t.Fatalf("pod on %s with IP %s, want node %s and an IP in %s", running.Spec.NodeName, running.Status.PodIP, server, podCIDR(2))
	}
	client := testState.Nodes[0].NS
	for _, addr := range []string{running.Status.PodIP, svc.Spec.ClusterIP} {
		// kube-proxy programs the Service a moment after the pod is ready.
		waitDial(ctx, t, client, net.JoinHostPort(addr, "5201"))
	}
	out, err := proc.Command(ctx, client, "conntrack", "-L", "-p", "tcp", "-d", svc.Spec.ClusterIP).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "src="+running.Status.PodIP) {
		t.Errorf("conntrack in %s shows no translation of %s to %s:\n%s", client, svc.Spec.ClusterIP, running.Status.PodIP, out)
	}
}

// A `kube up` killed with SIGKILL once its first node's daemons run leaves
// nothing after `vnetlab clean`.
func TestCleanAfterKilledUp(t *testing.T) {
	needCluster(t)
	const name = "vkk"
	cmd := exec.Command(os.Getenv("VNETLAB_BIN"), "kube", "up", "--name", name, "--nodes", "1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(lab.Dir(name), "journal")
	// kill once kubelet is journaled (etcd, apiserver, forwarder, controllers, containerd, kubelet).
	err := waitFor(context.Background(), 2*time.Minute, "kube up to start its node's kubelet", func() bool {
		b, _ := os.ReadFile(journal)
		return strings.Count(string(b), lab.KindProc+" ") >= 7
	})
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	st := &lab.State{Name: name, Nodes: []lab.NodeState{{Name: NodeName(name, 1)}}}
	if msg := Leftovers(st, nil); msg == "" {
		t.Fatal("a killed kube up left nothing to clean: the test did not kill it midway")
	}
	out, err := exec.Command(os.Getenv("VNETLAB_BIN"), "clean").CombinedOutput()
	if err != nil {
		t.Fatalf("clean: %v: %s", err, out)
	}
	if msg := Leftovers(st, nil); msg != "" {
		t.Errorf("after clean: %s", msg)
	}
	if _, err := Load(testCluster); err != nil {
		t.Errorf("clean removed the cluster in use: %v", err)
	}
}

// waitDial waits up to a minute until a TCP connection from namespace ns to
// addr (host:port) succeeds: kube-proxy programs a Service a moment after
// its endpoint is ready.
func waitDial(ctx context.Context, t *testing.T, ns, addr string) {
	t.Helper()
	if err := waitFor(ctx, time.Minute, "a connection to "+addr+" from "+ns, func() bool {
		return nsutil.Do(ns, func() error {
			c, err := net.DialTimeout("tcp", addr, 3*time.Second)
			if err == nil {
				c.Close()
			}
			return err
		}) == nil
	}); err != nil {
		t.Fatal(err)
	}
}

// upTestCluster brings up a further cluster for one test and registers its
// teardown, checked to leave nothing; check, if any, then looks further.
func upTestCluster(ctx context.Context, t *testing.T, spec Spec, check func(st *lab.State)) *lab.State {
	t.Helper()
	start := time.Now()
	st, err := Up(ctx, spec, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube up (%s, %s): %s", spec.Network().CNIText(), spec.Proxy, time.Since(start).Round(100*time.Millisecond))
	t.Cleanup(func() {
		start := time.Now()
		if err := Down(spec.Name, nil); err != nil {
			t.Errorf("kube down: %v", err)
		}
		t.Logf("kube down: %s", time.Since(start).Round(100*time.Millisecond))
		if msg := Leftovers(st, nil); msg != "" {
			t.Errorf("kube down left: %s", msg)
		}
		if check != nil {
			check(st)
		}
	})
	return st
}

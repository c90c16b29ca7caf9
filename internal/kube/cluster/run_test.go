package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/results"
)

// vnetlab runs the built vnetlab and returns its stdout+stderr and error.
func vnetlab(t *testing.T, limit time.Duration, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var out bytes.Buffer
	c := exec.CommandContext(ctx, os.Getenv("VNETLAB_BIN"), args...)
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("vnetlab %s did not end within %s:\n%s", strings.Join(args, " "), limit, out.String())
	}
	return out.String(), err
}

// The whole matrix with short samples: every cell has valid, non-zero
// samples, and its nodes are where the placement says.
func TestKubeRunMatrix(t *testing.T) {
	cs := needCluster(t)
	out := filepath.Join(t.TempDir(), "r.json")
	log, err := vnetlab(t, 10*time.Minute, "kube", "run", "--cluster", testCluster, "--paths", "pod,service,host",
		"--placements", "same-node,cross-node", "--tests", "tcp_stream,tcp_rr", "--repeat", "2", "--duration", "1s", "-o", out)
	if err != nil {
		t.Fatalf("kube run: %v\n%s", err, log)
	}
	f, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cells) != 3*2*2 {
		t.Fatalf("%d cells, want 12", len(f.Cells))
	}
	n1, n2 := testState.Nodes[0].Name, testState.Nodes[1].Name
	for _, c := range f.Cells {
		name := c.Path + "@" + c.Placement + "/" + c.Test
		if c.Valid != 2 || c.Median <= 0 {
			t.Errorf("%s: %d valid samples, median %g", name, c.Valid, c.Median)
		}
		wantClient := n1
		if c.Placement == measure.CrossNode {
			wantClient = n2
		}
		if c.ServerNode != n1 || c.ClientNode != wantClient {
			t.Errorf("%s: server on %s, client on %s; want %s and %s", name, c.ServerNode, c.ClientNode, n1, wantClient)
		}
	}
	cl := f.Metadata.Cluster
	if cl == nil || cl.ServerVersion != testState.Facts[FactVersion] || cl.KubeProxyMode != "iptables" || len(cl.Nodes) != 2 || cl.Nodes[0].Kernel == "" {
		t.Errorf("cluster metadata: %+v", cl)
	}
	if left := labelledNamespaces(t, cs); len(left) > 0 {
		t.Errorf("kube run left namespaces %v", left)
	}
}

// The pods run on the nodes the session names, and a sample through the
// Service path is translated by kube-proxy in the client's node (conntrack
// there shows the ClusterIP answered by the server pod).
func TestKubeSessionPlacementAndService(t *testing.T) {
	needCluster(t)
	ctx := context.Background()
	s, err := measure.Setup(ctx, measure.Options{Kubeconfig: testState.Facts[FactKubeconfig], Paths: []string{measure.PathService},
		Placements: []string{measure.CrossNode}, Image: testState.Facts[FactImage], PullPolicy: corev1.PullNever}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ep := s.Endpoints[0]
	for pod, node := range map[string]string{ep.ServerPod: ep.ServerNode, ep.ClientPod: ep.ClientNode} {
		p, err := s.Client.CoreV1().Pods(s.Namespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil || p.Spec.NodeName != node {
			t.Fatalf("pod %s: %v, on %q, want %s", pod, err, p.Spec.NodeName, node)
		}
	}
	srv := s.Exec.Command(ctx, ep.ServerPod, "/usr/bin/vnetlab", "rr-server", "--proto", "tcp", "--port", "7001", "--size", "1")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Kill(); srv.Wait() }()
	var clientNS string
	for _, n := range testState.Nodes {
		if n.Name == ep.ClientNode {
			clientNS = n.NS
		}
	}
	server, _ := s.Client.CoreV1().Pods(s.Namespace).Get(ctx, ep.ServerPod, metav1.GetOptions{})
	if err := waitFor(ctx, 30*time.Second, "an rr exchange through "+ep.Addr, func() bool {
		_, err := s.Exec.Command(ctx, ep.ClientPod, "/usr/bin/vnetlab", "rr-client", "--proto", "tcp", "--mode", "rr",
			"--addr", ep.Addr+":7001", "--duration", "1s", "-o", "json").Output()
		return err == nil
	}); err != nil {
		t.Fatal(err)
	}
	ct, err := exec.Command("nsenter", "--net=/run/netns/"+clientNS, "conntrack", "-L", "-p", "tcp", "-d", ep.Addr).CombinedOutput()
	if err != nil {
		t.Fatalf("conntrack in %s: %v: %s", clientNS, err, ct)
	}
	if !strings.Contains(string(ct), "src="+server.Status.PodIP) {
		t.Errorf("conntrack in %s shows no translation of %s to the server pod %s:\n%s", clientNS, ep.Addr, server.Status.PodIP, ct)
	}
}

// Bad input: one line naming the problem and the fix, exit 1, no namespace left.
func TestKubeRunBadInput(t *testing.T) {
	cs := needCluster(t)
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable")
	if err := writeTemplate(unreachable, kubeconfigTmpl, map[string]string{"Cluster": "x", "Server": "https://127.0.0.1:1", "CA": filepath.Join(lab0Dir(), "pki", "ca.crt"), "Token": "t"}); err != nil {
		t.Fatal(err)
	}
	noRights := filepath.Join(dir, "norights")
	writeTokenKubeconfig(t, cs, noRights)
	run := []string{"kube", "run", "--tests", "tcp_rr", "--repeat", "1", "--duration", "1s"}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unreachable API server", []string{"--kubeconfig", unreachable}, "cannot reach the API server"},
		{"missing RBAC", []string{"--kubeconfig", noRights}, "missing RBAC permission"},
		{"cross-node on one node", []string{"--cluster", testCluster, "--nodes", testState.Nodes[0].Name + "," + testState.Nodes[0].Name}, "cross-node needs two"},
		{"image the nodes cannot get", []string{"--cluster", testCluster, "--image", "vnetlab.local/missing:1"}, "cannot get image"},
		{"unknown path", []string{"--cluster", testCluster, "--paths", "nodeport"}, "unknown path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := vnetlab(t, 3*time.Minute, append(run, c.args...)...)
			var ee *exec.ExitError
			if err == nil || !asExit(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("want exit 1, got %v:\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if last := lines[len(lines)-1]; !strings.Contains(last, c.want) {
				t.Errorf("last line %q does not say %q:\n%s", last, c.want, out)
			}
			if left := labelledNamespaces(t, cs); len(left) > 0 {
				t.Errorf("namespaces left: %v", left)
			}
		})
	}
	// No Ready schedulable node: both cordoned.
	t.Run("no schedulable node", func(t *testing.T) {
		setUnschedulable(t, cs, true)
		defer setUnschedulable(t, cs, false)
		out, err := vnetlab(t, time.Minute, append(run, "--cluster", testCluster)...)
		if err == nil || !strings.Contains(out, "no Ready schedulable node") {
			t.Errorf("want a no-node error, got %v:\n%s", err, out)
		}
	})
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

func lab0Dir() string { return filepath.Dir(testState.Facts[FactKubeconfig]) }

// labelledNamespaces lists vnetlab's namespaces not already being deleted.
func labelledNamespaces(t *testing.T, cs kubernetes.Interface) []string {
	t.Helper()
	list, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: measure.LabelKey + "=" + measure.LabelValue})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		if n.DeletionTimestamp == nil {
			out = append(out, n.Name)
		}
	}
	return out
}

func setUnschedulable(t *testing.T, cs kubernetes.Interface, on bool) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"unschedulable": on}})
	for _, n := range testState.Nodes {
		if _, err := cs.CoreV1().Nodes().Patch(context.Background(), n.Name, "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// writeTokenKubeconfig writes a kubeconfig for a ServiceAccount no role is
// bound to.
func writeTokenKubeconfig(t *testing.T, cs kubernetes.Interface, path string) {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "vnetlab-test-norights"}}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "exists") {
		t.Fatal(err)
	}
	tok, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeTemplate(path, kubeconfigTmpl, map[string]string{"Cluster": "x", "Server": testState.Facts[FactServer], "CA": filepath.Join(lab0Dir(), "pki", "ca.crt"), "Token": tok.Status.Token}); err != nil {
		t.Fatal(err)
	}
}

// A `kube run` killed with SIGKILL leaves its labelled namespace; `kube
// clean` deletes it.
func TestKubeCleanAfterKilledRun(t *testing.T) {
	cs := needCluster(t)
	cmd := exec.Command(os.Getenv("VNETLAB_BIN"), "kube", "run", "--cluster", testCluster, "--paths", "pod",
		"--placements", "same-node", "--tests", "tcp_rr", "--repeat", "20", "--duration", "5s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := waitFor(context.Background(), 2*time.Minute, "kube run's namespace", func() bool { return len(labelledNamespaces(t, cs)) > 0 })
	cmd.Process.Kill()
	cmd.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := vnetlab(t, time.Minute, "kube", "clean", "--cluster", testCluster); err != nil {
		t.Fatalf("kube clean: %v\n%s", err, out)
	}
	if left := labelledNamespaces(t, cs); len(left) > 0 {
		t.Errorf("kube clean left %v", left)
	}
}

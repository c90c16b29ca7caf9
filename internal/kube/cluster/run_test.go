package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/mutate"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
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

// interrupted runs vnetlab args, sends it Ctrl-C once its output holds
// marker (waited for up to limit: what names it), and returns its output
// and exit error; the run must end within 2 minutes of the signal.
func interrupted(t *testing.T, limit time.Duration, marker, what string, args ...string) (string, error) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "log")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.Command(os.Getenv("VNETLAB_BIN"), args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitErr := waitFor(context.Background(), limit, what, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), marker)
	})
	cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var runErr error
	select {
	case runErr = <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("vnetlab %s did not end within 2 minutes of Ctrl-C", strings.Join(args, " "))
	}
	log, _ := os.ReadFile(logPath)
	if waitErr != nil {
		t.Fatalf("%v:\n%s", waitErr, log)
	}
	if runErr == nil {
		t.Errorf("an interrupted run exited 0:\n%s", log)
	}
	return string(log), runErr
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
		{"policies on a cluster that enforces none", []string{"--cluster", testCluster, "--sweep", "policies=0,10"}, "enforces no NetworkPolicy"},
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

// Bad input: pods that never become Ready. A container that exits at once
// (an --image whose entrypoint does not stay up) is reported as soon as it
// exits; a pod whose sandbox is never created (here: the node's pod IP range
// is used up) after --ready-timeout. Each: exit 1, one last line naming the
// pod, what it is doing and the fix, no namespace left.
func TestKubeRunPodsNeverReady(t *testing.T) {
	cs := needCluster(t)
	run := []string{"kube", "run", "--cluster", testCluster, "--paths", "pod", "--placements", "same-node", "--tests", "tcp_rr",
		"--repeat", "1", "--duration", "1s"}
	check := func(t *testing.T, limit time.Duration, args []string, want ...string) {
		t.Helper()
		start := time.Now()
		out, err := vnetlab(t, limit, append(run, args...)...)
		var ee *exec.ExitError
		if err == nil || !asExit(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("want exit 1, got %v:\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := lines[len(lines)-1]
		for _, w := range want {
			if !strings.Contains(last, w) {
				t.Errorf("last line %q does not say %q:\n%s", last, w, out)
			}
		}
		t.Logf("after %s: %s", time.Since(start).Round(time.Second), last)
		if left := labelledNamespaces(t, cs); len(left) > 0 {
			t.Errorf("namespaces left: %v", left)
		}
	}
	t.Run("container exits", func(t *testing.T) {
		ref := loadExitingImage(t)
		// Whichever of the two pods is seen first is named.
		check(t, 2*time.Minute, []string{"--image", ref}, " on "+testState.Nodes[0].Name+": container exited (Completed, code 0)", "keep its entrypoint running")
	})
	t.Run("pod IP range used up", func(t *testing.T) {
		exhaustPodIPs(t, cs, testState.Nodes[0].Name)
		check(t, 2*time.Minute, []string{"--ready-timeout", "15s"}, "not Ready after 15s", "phase Pending", "FailedCreatePodSandBox",
			"no IP addresses available", "--ready-timeout")
	})
}

// loadExitingImage loads into every node vnetlab's image with an entrypoint
// that exits at once (`vnetlab --help`) and returns its reference.
func loadExitingImage(t *testing.T) string {
	t.Helper()
	img, err := image.Build(os.Getenv("VNETLAB_BIN"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Entrypoint = []string{image.VnetlabPath, "--help"}
	if img.Image, err = mutate.ConfigFile(img.Image, cfg); err != nil {
		t.Fatal(err)
	}
	img.Ref = "vnetlab.local/exits-at-once:1"
	tar := filepath.Join(t.TempDir(), "exits.tar")
	if err := img.Write(tar); err != nil {
		t.Fatal(err)
	}
	if err := LoadImages(context.Background(), testCluster, []string{tar}); err != nil {
		t.Fatal(err)
	}
	return img.Ref
}

// exhaustPodIPs reserves every free address of a node's host-local range
// (a file per address, as host-local keeps them) until the test ends, so
// that no new pod on the node gets a sandbox. It first waits until the
// earlier runs' pods have released theirs (their namespaces are deleted
// without waiting), or a late release would free an address.
func exhaustPodIPs(t *testing.T, cs kubernetes.Interface, node string) {
	t.Helper()
	dir := filepath.Join(lab0Dir(), node, "cni-ipam", "vnetlab")
	ipFiles := func() int {
		n := 0
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if net.ParseIP(e.Name()) != nil {
				n++
			}
		}
		return n
	}
	if err := waitFor(context.Background(), 90*time.Second, "the earlier runs' pods to release their addresses", func() bool {
		pods, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false
		}
		live := 0
		for _, p := range pods.Items {
			if p.Labels[measure.LabelKey] == measure.LabelValue {
				return false
			}
			if !p.Spec.HostNetwork {
				live++
			}
		}
		return ipFiles() == live
	}); err != nil {
		t.Fatal(err)
	}
	conf, err := filepath.Glob(filepath.Join(lab0Dir(), node, "cni", "*.conflist"))
	if err != nil || len(conf) != 1 {
		t.Fatalf("CNI config of %s: %v %v", node, conf, err)
	}
	b, err := os.ReadFile(conf[0])
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"subnet":\s*"([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no subnet in %s", conf[0])
	}
	_, subnet, err := net.ParseCIDR(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	t.Cleanup(func() {
		for _, f := range made {
			os.Remove(f)
		}
	})
	ones, bits := subnet.Mask.Size()
	base := subnet.IP.To4()
	for i := 1; i < 1<<(bits-ones)-1; i++ {
		ip := net.IPv4(base[0], base[1], base[2]+byte(i>>8), base[3]+byte(i))
		f := filepath.Join(dir, ip.String())
		if _, err := os.Stat(f); err == nil {
			continue
		}
		if err := os.WriteFile(f, []byte("vnetlab-test-reserved\neth0"), 0o644); err != nil {
			t.Fatal(err)
		}
		made = append(made, f)
	}
	t.Logf("reserved %d addresses of %s in %s", len(made), subnet, dir)
}

// A scenario with a kube: section drives a whole kube run: the file names
// the cluster, path, placement, samples and output; a flag given too
// overrides the file's tests.
func TestKubeRunScenario(t *testing.T) {
	needCluster(t)
	file, f := runKubeFile(t, "description: one same-node pod cell\ntests: [tcp_rr]\nduration: 1s\nrepeat: 2\n"+
		"kube:\n  cluster: "+testCluster+"\n  paths: [pod]\n  placements: [same-node]\n  label: from-file\n", "--tests", "tcp_crr")
	if len(f.Cells) != 1 {
		t.Fatalf("%d cells, want the file's one", len(f.Cells))
	}
	c := f.Cells[0]
	if c.Mode != "from-file" || c.Path != measure.PathPod || c.Placement != measure.SameNode || c.Test != "tcp_crr" || c.Valid != 2 || c.Median <= 0 {
		t.Errorf("cell %s %s@%s %s: %d valid, median %g; want from-file pod@same-node tcp_crr (the flag over the file's tcp_rr), 2 valid",
			c.Mode, c.Path, c.Placement, c.Test, c.Valid, c.Median)
	}
	if c.ServerNode != testState.Nodes[0].Name || c.ClientNode != c.ServerNode {
		t.Errorf("same-node cell ran on %s and %s", c.ServerNode, c.ClientNode)
	}
	if f.Metadata.Scenario != file || f.Metadata.Settings.Repeat != 2 || f.Metadata.Settings.Duration != "1s" {
		t.Errorf("metadata: scenario %q, settings %+v", f.Metadata.Scenario, f.Metadata.Settings)
	}
}

// A sweep of streams on the cluster: one cell per value, each
// named by its point, every sample valid.
func TestKubeRunSweepStreams(t *testing.T) {
	needCluster(t)
	out := filepath.Join(t.TempDir(), "r.json")
	log, err := vnetlab(t, 5*time.Minute, "kube", "run", "--cluster", testCluster, "--paths", "pod", "--placements", "same-node",
		"--tests", "tcp_stream", "--sweep", "streams=1,4", "--repeat", "2", "--duration", "1s", "-o", out)
	if err != nil {
		t.Fatalf("kube run --sweep: %v\n%s", err, log)
	}
	f, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Cells) != 2 {
		t.Fatalf("%d cells, want one per value of streams", len(f.Cells))
	}
	for i, want := range []string{"streams=1", "streams=4"} {
		c := f.Cells[i]
		if c.Point != want || c.Valid != 2 || c.Median <= 0 {
			t.Errorf("cell %d: point %q, %d valid, median %g; want %s with 2 valid samples", i, c.Point, c.Valid, c.Median, want)
		}
	}
	if s := f.Metadata.Settings.Sweep; s == nil || len(s.Axes) != 1 || s.Axes[0].Key() != "streams" {
		t.Errorf("settings' sweep: %+v", s)
	}
}

// kube.lab: the file's lab measured beside the cluster in one run: a lab
// cell then a cluster cell every round, both profiled (--profile on a local
// cluster), the lab's cells without the cluster's node CPU, one file whose
// lab and cluster sides pair by path (the two-node lab's host with the
// cross-node cell, kube.lab_same_node's one-node host-1node with the
// same-node cell), and the labs gone afterwards.
func TestKubeRunLabBeside(t *testing.T) {
	needCluster(t)
	_, f := runKubeFile(t, "modes: [host]\nnodes: 2\ntests: [tcp_rr]\nduration: 1s\nrepeat: 2\n"+
		"kube:\n  cluster: "+testCluster+"\n  lab: true\n  lab_same_node: [host]\n  paths: [host]\n  placements: [same-node, cross-node]\n  label: beside\n", "--profile")
	if got, want := cellNames(f), []string{"host/pod/tcp_rr", "beside/host@same-node/tcp_rr", "host-1node/pod/tcp_rr", "beside/host@cross-node/tcp_rr"}; !slices.Equal(got, want) {
		t.Fatalf("cells %v, want %v: the labs' cells each before a cluster cell", got, want)
	}
	for _, c := range f.Cells {
		if c.Valid != 2 || c.Median <= 0 || c.Profile == nil || c.Profile.Units <= 0 || c.Profile.Samples == 0 {
			t.Errorf("%s: %d valid, median %g, profile %+v; want 2 valid samples, profiled", c.ID(), c.Valid, c.Median, c.Profile)
		}
	}
	if f.Cells[0].Nodes != 2 || f.Cells[2].Nodes != 0 || f.Cells[2].LabMode != "host" {
		t.Errorf("lab cells: nodes %d and %d, %s's mode %q; want the two-node lab's host, then a one-node lab's labelled host", f.Cells[0].Nodes, f.Cells[2].Nodes, f.Cells[2].Mode, f.Cells[2].LabMode)
	}
	// Interleaved: every round measures each cell once, lab and cluster
	// alike, in an order of its own (slots 1-4), before the next round.
	for round := 0; round < 2; round++ {
		slots := map[int]bool{}
		for _, c := range f.Cells {
			s := c.Samples[round]
			slots[s.Slot] = true
			if s.RoundIndex != round+1 {
				t.Errorf("%s sample %d: round %d", c.ID(), round+1, s.RoundIndex)
			}
			for _, o := range f.Cells {
				if round > 0 && !s.Start.After(o.Samples[round-1].Start) {
					t.Errorf("%s's sample of round %d started before %s's of round %d", c.ID(), round+1, o.ID(), round)
				}
			}
		}
		if len(slots) != len(f.Cells) {
			t.Errorf("round %d: slots %v, want one per cell", round+1, slots)
		}
	}
	for i, c := range f.Cells {
		for _, s := range c.Samples {
			if lab := i%2 == 0; lab != (s.NodeCPU == nil) {
				t.Errorf("%s: node CPU %v; want it on the cluster's cells only", c.ID(), s.NodeCPU)
			}
		}
	}
	labSide, clusterSide, ok := analysis.SplitLabCluster(f)
	if !ok {
		t.Fatal("the file does not split into a lab and a cluster side")
	}
	var pairs []string
	for _, d := range analysis.Diff(labSide, clusterSide).Deltas {
		pairs = append(pairs, d.Name())
	}
	if want := []string{"host|pod||tcp_rr ~ beside|host||tcp_rr|@cross-node", "host-1node|pod||tcp_rr ~ beside|host||tcp_rr|@same-node"}; !slices.Equal(pairs, want) {
		t.Errorf("lab against cluster: %v, want %v", pairs, want)
	}
	entries, _ := os.ReadDir("/run/vnetlab/labs")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "run") || strings.HasPrefix(e.Name(), "one") {
			t.Errorf("lab %s left after the run", e.Name())
		}
	}
}

func cellNames(f *results.File) []string {
	var out []string
	for _, c := range f.Cells {
		out = append(out, c.ID().String())
	}
	return out
}

// runKubeFile runs `kube run -f` on a scenario of body (its output: a
// file in a temporary directory) with args, and returns the scenario's path
// and the results.
func runKubeFile(t *testing.T, body string, args ...string) (string, *results.File) {
	t.Helper()
	dir := t.TempDir()
	out, file := filepath.Join(dir, "out.json"), filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(file, []byte(body+"output: "+out+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := vnetlab(t, 5*time.Minute, append([]string{"kube", "run", "-f", file}, args...)...)
	if err != nil {
		t.Fatalf("kube run -f %s: %v\n%s", strings.Join(args, " "), err, log)
	}
	f, err := results.Read(out)
	if err != nil {
		t.Fatalf("the file's output: %v\n%s", err, log)
	}
	return file, f
}

// kube run takes a rate as run does: a cluster's tcp_rr cell at
// an absolute rate runs open-loop and answers it within 2% (pods on two
// nodes of a shared machine, not an idle lab path: 1% is the lab test's),
// and a cell at a share of the path's maximum records the path measured
// closed-loop first and offers that share of it.
func TestKubeRunRate(t *testing.T) {
	cs := needCluster(t)
	out := filepath.Join(t.TempDir(), "r.json")
	log, err := vnetlab(t, 10*time.Minute, "kube", "run", "--cluster", testCluster, "--paths", "pod",
		"--placements", "cross-node", "--tests", "tcp_rr", "--sweep", "rate=1000,10%", "--repeat", "1", "--duration", "2s", "-o", out)
	if err != nil {
		t.Fatalf("kube run: %v\n%s", err, log)
	}
	f, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	cells := map[string]*results.Cell{}
	for _, c := range f.Cells {
		cells[c.Point] = c
	}
	abs, share := cells["rate=1000"], cells["rate=10%"]
	if abs == nil || share == nil || abs.Valid != 1 || share.Valid != 1 {
		t.Fatalf("cells %v: want one valid sample at rate=1000 and rate=10%%\n%s", cells, log)
	}
	if s := abs.Samples[0]; s.Schedule == nil || s.Schedule.Offered != 1000 || s.Value < 980 || s.Value > 1020 {
		t.Errorf("rate=1000: schedule %+v, achieved %.1f/s: want 1000/s offered and achieved within 2%%", s.Schedule, s.Value)
	}
	m := share.RateMax
	if m == nil || m.Error != "" || len(m.ClosedLoop) != 3 || m.Max <= 0 || m.Offered != math.Round(0.1*m.Max) {
		t.Fatalf("rate=10%%: rate max %+v: want 3 closed-loop samples and a tenth of their median offered", m)
	}
	if s := share.Samples[0]; s.Schedule == nil || s.Schedule.Offered != m.Offered {
		t.Errorf("rate=10%%: schedule %+v, want %g/s offered", s.Schedule, m.Offered)
	}
	t.Logf("cross-node pod tcp_rr: 100%% = %.0f/s (closed loop %v), 10%% offered %g, achieved %.0f/s, p99 %.0f us; 1000/s p99 %.0f us",
		m.Max, m.ClosedLoop, m.Offered, share.Samples[0].Value, share.Latency["p99"], abs.Latency["p99"])
	if left := labelledNamespaces(t, cs); len(left) > 0 {
		t.Errorf("kube run left namespaces %v", left)
	}
}

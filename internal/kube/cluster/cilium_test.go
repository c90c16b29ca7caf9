package cluster

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// ciliumEnv asks for the Cilium cluster tests: they build Cilium (about 6
// minutes on 2 idle cores when not cached) and compile its datapath at
// start. make test runs TestCilium* with it, in a go test of their own
// after the cluster packages (CILIUM_SMOKE), with Cilium built ahead of
// time; the policy behaviours with Cilium's enforcer run only when asked.
const ciliumEnv = "VNETLAB_CILIUM"

func needCilium(t *testing.T) {
	t.Helper()
	if os.Getenv(ciliumEnv) != "1" {
		t.Skip("set " + ciliumEnv + "=1 to run the Cilium cluster tests")
	}
	if skipWhy != "" {
		t.Skip(skipWhy)
	}
}

func TestSpecValidateCilium(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{CNI: clusternet.CNICilium, CNIMode: "veth-routed"}, "--cni-mode veth-routed: modes are vnetlab's plugin's: --cni cilium routes natively"},
		{Spec{CNI: clusternet.CNICilium, Proxy: clusternet.VnetlabSock}, "--proxy vnetlab-sock with --cni cilium: vnetlab's proxy attaches programs"},
		{Spec{CNI: clusternet.CNICilium, NetworkPolicy: clusternet.PolicyVnetlab}, "--network-policy vnetlab with --cni cilium: Cilium's programs on the pods' veths route past other enforcers' rules: use --network-policy cilium (its agent's own) or none"},
		{Spec{CNI: clusternet.CNICilium, NetworkPolicy: clusternet.PolicyKubeRouter}, "--network-policy kube-router with --cni cilium"},
		{Spec{NetworkPolicy: clusternet.PolicyCilium}, "--network-policy cilium is cilium's own: add --cni cilium (the cluster's CNI is bridge)"},
		{Spec{CNI: clusternet.CNIFlannel, NetworkPolicy: clusternet.PolicyCilium}, "--network-policy cilium is cilium's own: add --cni cilium (the cluster's CNI is flannel)"},
		{Spec{CNI: clusternet.CNICilium, Family: family.Dual}, "--cni cilium with --ip-family dual: vnetlab runs Cilium IPv4-only so far"},
		{Spec{CNI: clusternet.CNICilium, FlannelBackend: clusternet.FlannelHostGW}, "backends are flannel's"},
		{Spec{Proxy: clusternet.CiliumKPR}, "--proxy cilium is cilium's own: add --cni cilium (the cluster's CNI is bridge)"},
		{Spec{CNI: clusternet.CNIVnetlab, Proxy: clusternet.CiliumKPR}, "--proxy cilium is cilium's own: add --cni cilium"},
	} {
		c.spec.Name, c.spec.Nodes = "k", 2
		if c.spec.Proxy == "" {
			c.spec.Proxy = clusternet.IPTables
		}
		err := c.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.spec, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %q is more than one line", c.spec, err)
		}
	}
	// Cilium's own enforcement is its default, as Cilium installs; none
	// may be asked for.
	for _, policy := range []string{"", clusternet.PolicyCilium, clusternet.PolicyNone} {
		want := policy
		if want == "" {
			want = clusternet.PolicyCilium
		}
		for _, proxy := range []string{clusternet.IPTables, clusternet.NFTables, clusternet.CiliumKPR} {
			s := Spec{Name: "k", Nodes: 2, Proxy: proxy, CNI: clusternet.CNICilium, NetworkPolicy: policy}
			if err := s.Validate(); err != nil {
				t.Errorf("%s, policy %q: %v", proxy, policy, err)
			}
			f := s.networkFacts()
			if f[FactCNIPlugin] != clusternet.CNICilium || f[FactCNIMode] != clusternet.CiliumNative || f[FactCNI] != "cilium native" || f[FactPolicy] != want {
				t.Errorf("%s, policy %q: facts %v, want policy %s", proxy, policy, f, want)
			}
		}
	}
}

// The agent's flags keep everything it makes inside the node: its bpffs,
// lib and run directory under the node's directory, its cgroup root the
// bound one, its devices the node's uplink, IPv4 only.
func TestCiliumAgentArgs(t *testing.T) {
	n := node{name: "k-node1", dir: "/run/vnetlab/labs/k/k-node1"}
	args := strings.Join(ciliumAgentArgs(n, "/kc", false, true), " ")
	for _, want := range []string{"--bpf-root=/run/vnetlab/labs/k/k-node1/bpffs", "--cgroup-root=/run/cilium/cgroupv2",
		"--lib-dir=/run/vnetlab/labs/k/k-node1/cilium-lib", "--write-cni-conf-when-ready=/run/vnetlab/labs/k/k-node1/cilium-run/05-cilium.conflist",
		"--cni-log-file=/run/vnetlab/labs/k/k-node1/cilium-run/cilium-cni.log", "--devices=eth0", "--enable-ipv6=false",
		"--ipam=kubernetes", "--identity-allocation-mode=crd", "--k8s-kubeconfig-path=/kc", "--ipv4-native-routing-cidr=10.244.0.0/16", "--enable-policy=default"} {
		if !strings.Contains(args, want) {
			t.Errorf("agent args lack %s: %s", want, args)
		}
	}
	off := strings.Join(ciliumAgentArgs(n, "/kc", true, false), " ")
	if !strings.Contains(args, "--kube-proxy-replacement=false") || !strings.Contains(off, "--kube-proxy-replacement=true") {
		t.Error("--kube-proxy-replacement does not follow kpr")
	}
	if !strings.Contains(off, "--enable-policy=never") {
		t.Errorf("policy off, yet the agent enforces: %s", off)
	}
}

// The mount namespace vnetlab kube cilium-exec makes: the run directory on
// /run/cilium, /proc/sys read-only (a write of a kernel sysctl's own value
// refused) but for /proc/sys/net (of a namespace made for the test), and
// nothing of it seen outside.
func TestCiliumExecNamespace(t *testing.T) {
	needCilium(t)
	if _, err := os.Stat(CiliumRun); err != nil {
		if err := os.Mkdir(CiliumRun, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(CiliumRun)
	}
	run := t.TempDir()
	if err := os.WriteFile(filepath.Join(run, "mark"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := lab.ReadSysctl("kernel.timer_migration")
	if err != nil {
		t.Fatal(err)
	}
	script := "cat /run/cilium/mark; echo; if echo " + v + " > /proc/sys/kernel/timer_migration; then echo kernel-writable; else echo kernel-refused; fi; " +
		"if echo 1 > /proc/sys/net/ipv4/conf/all/forwarding; then echo net-writable; fi"
	// In a network namespace of its own, gone with it: the write to
	// /proc/sys/net is that namespace's. The kernel sysctl's write is of
	// its own value: nothing changes even if it were let through.
	c := exec.Command(os.Getenv("VNETLAB_BIN"), "kube", "cilium-exec", "--run", run, "--", "sh", "-c", script)
	c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("cilium-exec: %v: %s", err, out)
	}
	for _, want := range []string{"x\n", "kernel-refused", "net-writable"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cilium-exec's namespace: output %q lacks %q", out, want)
		}
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), run) {
		t.Errorf("cilium-exec's mount of %s is seen outside its namespace", run)
	}
}

// kube up --cni cilium: the operator and an agent per node in their own
// mount namespaces; pods reach each other on the same node and across
// nodes and a ClusterIP (podPaths); each agent's endpoints are the node's
// pods; one NetworkPolicy denies, and once deleted allows again
// (ciliumPolicy); the agent's writes of the machine-wide sysctls were
// refused and they, and the cgroup v2 root's programs, are unchanged while
// it runs and after; node 1's route to node 2's pods is the agent's
// (vnetlab adds none with Cilium); kube down leaves nothing, nor
// /run/cilium.
func TestCiliumCluster(t *testing.T) {
	needCilium(t)
	for _, c := range []struct{ name, proxy string }{{"cil", clusternet.IPTables}, {"cilk", clusternet.CiliumKPR}} {
		t.Run(c.proxy, func(t *testing.T) { ciliumCluster(t, c.name, c.proxy) })
	}
}

// ciliumCluster is TestCiliumCluster with one proxy: kube-proxy beside the
// agents, or their kube-proxy replacement, whose socket programs are on
// each node's cgroup and whose nodes run no kube-proxy.
func ciliumCluster(t *testing.T, name, proxy string) {
	keys := append(append([]string{}, CiliumLockedSysctls...), cgroupRootKey)
	before := MachineState()
	unchanged := func(when string) {
		now := MachineState()
		for _, k := range keys {
			if now[k] != before[k] {
				t.Errorf("%s: %s = %q, was %q", when, k, now[k], before[k])
			}
		}
	}
	_, runBefore := os.Stat(CiliumRun)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	st := upTestCluster(ctx, t, Spec{Name: name, Nodes: 2, Proxy: proxy, CNI: clusternet.CNICilium}, func(*lab.State) {
		unchanged("after kube down")
		if _, err := os.Stat(CiliumRun); err == nil && runBefore != nil {
			t.Errorf("kube down left %s", CiliumRun)
		}
	})
	if st.Facts[FactCNI] != "cilium native" {
		t.Errorf("fact cni = %q", st.Facts[FactCNI])
	}
	unchanged("while the cluster runs")
	for _, n := range st.Nodes {
		cg, err := NodeCgroup(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		connect := cgroupPrograms(t, cg, ebpf.AttachCGroupInet4Connect)
		if kpr := proxy == clusternet.CiliumKPR; kpr != (connect > 0) {
			t.Errorf("%s: %d connect4 programs on %s with --proxy %s", n.Name, connect, cg, proxy)
		}
		_, err = os.Stat(filepath.Join(lab.Dir(st.Name), "logs", n.Name+"-kube-proxy.log"))
		if kubeProxy := err == nil; kubeProxy != (proxy != clusternet.CiliumKPR) {
			t.Errorf("%s: kube-proxy started %v with --proxy %s", n.Name, kubeProxy, proxy)
		}
	}
	for _, n := range st.Nodes {
		log, _ := os.ReadFile(filepath.Join(lab.Dir(st.Name), "logs", n.Name+"-cilium-agent.log"))
		for _, s := range CiliumLockedSysctls {
			if !strings.Contains(string(log), "sysParamName="+s) {
				t.Errorf("%s's agent log shows no refused write of %s", n.Name, s)
			}
		}
	}
	// Each agent balances its pods' ClusterIP connections itself, once it
	// has the Service; kube-proxy in the node already does (waitDial). A
	// connection made through kube-proxy's translation before the agent
	// has the Service stalls once the agent starts translating its packets
	// (seen: 5 transactions in a second against 40000 on the pod IP), so the
	// clients wait for every agent.
	agentsHave := func(clusterIP string) {
		for _, n := range st.Nodes {
			var out []byte
			if err := waitFor(ctx, time.Minute, n.Name+"'s agent to have Service "+clusterIP, func() bool {
				out, _ = CiliumDbg(ctx, st, n.Name, "service", "list")
				return strings.Contains(string(out), clusterIP+":7001/TCP") && strings.Contains(string(out), "(active)")
			}); err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
		}
	}
	cs, ns, done := podPaths(ctx, t, st, agentsHave)
	t.Logf("transactions: %v", done)
	for path, n := range done {
		if n < 100 {
			t.Errorf("%s: %d transactions in a second", path, n)
		}
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		out, err := CiliumDbg(ctx, st, n.Name, "endpoint", "list")
		if err != nil {
			t.Fatalf("cilium-dbg endpoint list on %s: %v", n.Name, err)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == n.Name && p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning && !strings.Contains(string(out), p.Status.PodIP) {
				t.Errorf("%s's agent has no endpoint of pod %s (%s):\n%s", n.Name, p.Name, p.Status.PodIP, out)
			}
		}
	}
	ciliumPolicy(ctx, t, st, cs, ns, pods.Items)
	h, err := nsutil.Handle(st.Nodes[0].NS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	routes, err := h.RouteGet(podCIDR(2).IP)
	if err != nil || len(routes) == 0 || routes[0].Gw.String() != st.Nodes[1].IP {
		t.Errorf("%s's route to %s: %v (%v), want via %s", st.Nodes[0].Name, podCIDR(2), routes, err, st.Nodes[1].IP)
	}
	unchanged("after the pods ran")
}

// ciliumPolicy: one NetworkPolicy, enforced by the agents: while a policy
// selecting srv2 with no ingress rule stands, srv1 (on the other node)
// cannot connect to srv2's pod IP; once it is deleted, it can again.
func ciliumPolicy(ctx context.Context, t *testing.T, st *lab.State, cs kubernetes.Interface, ns string, pods []corev1.Pod) {
	t.Helper()
	ip := map[string]string{}
	for _, p := range pods {
		ip[p.Name] = p.Status.PodIP
	}
	from, to := podNetnsHolding(t, st.Name, ip["srv1"]), net.JoinHostPort(ip["srv2"], "7001")
	connects := func(want bool, when string) {
		t.Helper()
		what := "srv1 to connect to srv2 (" + to + ") " + when
		if !want {
			what = "srv2 (" + to + ") to refuse srv1 " + when
		}
		if err := waitFor(ctx, 30*time.Second, what, func() bool {
			var got string
			_ = nsutil.DoPath(from, func() error { got = measure.Dial(to, time.Second); return nil })
			return (got == measure.Connected) == want
		}); err != nil {
			t.Error(err)
		}
	}
	connects(true, "before the policy")
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "srv2-deny-ingress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "srv2"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	connects(false, "while a policy denies its ingress")
	if err := cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, deny.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	connects(true, "once the policy is deleted")
}

// cgroupPrograms counts the programs attached to cgroup dir at at.
func cgroupPrograms(t *testing.T, dir string, at ebpf.AttachType) int {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: at})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Programs)
}

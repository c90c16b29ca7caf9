package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/kube/netpolicy"
	"github.com/vnetlab/vnetlab/internal/measure/rrbench"
	"github.com/vnetlab/vnetlab/internal/platform/cni"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

func TestSpecValidateCNI(t *testing.T) {
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{CNI: "calico"}, `--cni "calico"`},
		{Spec{CNIMode: modes.VethRouted}, "add --cni vnetlab"},
		{Spec{CNI: clusternet.CNIVnetlab, CNIMode: "macvlan"}, `--cni-mode "macvlan"`},
	} {
		c.spec.Name, c.spec.Nodes, c.spec.Proxy = "k", 2, "iptables"
		if err := c.spec.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error containing %q", c.spec, err, c.want)
		}
	}
	// Every mode of vnetlab's plugin with every proxy, and where the proxy
	// finds the pods.
	for _, mode := range modes.AttachModes() {
		for _, proxy := range clusternet.ProxyNames() {
			if p, _ := clusternet.GetProxy(proxy); !p.Serves(clusternet.CNIVnetlab) {
				continue
			}
			ok := Spec{Name: "k", Nodes: 2, Proxy: proxy, CNI: clusternet.CNIVnetlab, CNIMode: mode}
			if err := ok.Validate(); err != nil {
				t.Errorf("%+v: %v", ok, err)
			}
		}
	}
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{}, "--bridge " + PodBridge},
		{Spec{CNI: clusternet.CNIVnetlab}, "--veth-prefix " + cni.HostIfPrefix},
		{Spec{CNI: clusternet.CNIVnetlab, CNIMode: modes.Bridge}, "--veth-prefix " + cni.HostIfPrefix},
		{Spec{CNI: clusternet.CNIVnetlab, CNIMode: modes.VethEBPF}, "--programs-by-cni"},
		{Spec{CNI: clusternet.CNIFlannel}, "--bridge " + PodBridge},
	} {
		if got := strings.Join(c.spec.proxyPodLinks(), " "); got != c.want {
			t.Errorf("--cni %q --cni-mode %q: the proxy gets %q, want %q", c.spec.CNI, c.spec.CNIMode, got, c.want)
		}
	}
}

// A second cluster, its pods wired by vnetlab's CNI plugin in mode
// veth-routed: pods get addresses from their node's range, reach each other
// on the same node and across nodes, reach a ClusterIP through kube-proxy;
// deleting the pods unwires them (kubelet's DEL), and `kube down` leaves
// nothing. VNETLAB_CNI_KUBEPROXY_MODES=veth-ebpf,bridge runs the same with
// those modes too (veth-ebpf: a same-node ClusterIP backend's replies go
// back through kube-proxy's conntrack, bpf/host.h's host_via_stack).
func TestVnetlabCNICluster(t *testing.T) {
	needCluster(t)
	modes := []string{modes.VethRouted}
	if m := os.Getenv("VNETLAB_CNI_KUBEPROXY_MODES"); m != "" {
		modes = append(modes, strings.Split(m, ",")...)
	}
	for i, mode := range modes {
		t.Run(mode, func(t *testing.T) { vnetlabCNICluster(t, fmt.Sprintf("vkc%d", i), mode) })
	}
}

func vnetlabCNICluster(t *testing.T, name, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	st := upTestCluster(ctx, t, Spec{Name: name, Nodes: 2, Proxy: "iptables", CNI: clusternet.CNIVnetlab, CNIMode: mode}, func(st *lab.State) {
		for i := range st.Nodes {
			if _, err := os.Stat(tcbpf.PinDir(NodePlane(name, i+1))); err == nil {
				t.Errorf("kube down left %s", tcbpf.PinDir(NodePlane(name, i+1)))
			}
		}
	})
	if st.Facts[FactCNI] != "vnetlab "+mode+" + host-local" {
		t.Errorf("fact cni = %q", st.Facts[FactCNI])
	}
	cs, ns, _ := podPaths(ctx, t, st)
	// Deleting the pods runs the plugin's DEL: no pod link stays on the nodes
	// (CoreDNS's pods are scaled away too).
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(dnsNamespace).Patch(ctx, dnsName, types.MergePatchType, []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, 2*time.Minute, "the pods' links to go from the nodes", func() bool {
		return podLinks(st) == ""
	}); err != nil {
		t.Errorf("%v: %s", err, podLinks(st))
	}
}

// podPaths checks a cluster's pod paths in a namespace of its own (returned
// with the cluster's client and each client's transactions): servers on
// both nodes get addresses from their node's range, and clients on node 1
// reach the same-node and the cross-node server by pod IP and node 2's
// server through its ClusterIP, as does a client on node 2; each
// serviceReady is called with the ClusterIP before the clients start.
func podPaths(ctx context.Context, t *testing.T, st *lab.State, serviceReady ...func(clusterIP string)) (kubernetes.Interface, string, map[string]uint64) {
	t.Helper()
	cs, err := Client(st.Facts[FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cni-test"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	img := st.Facts[FactImage]
	n1, n2 := st.Nodes[0].Name, st.Nodes[1].Name
	servers := map[string]string{"srv1": n1, "srv2": n2}
	for s, node := range servers {
		if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, pathServer(img, s, node), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := cs.CoreV1().Services(ns.Name).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "srv2"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "srv2"}, Ports: []corev1.ServicePort{{Port: 7001, TargetPort: intstr.FromInt32(7001)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	for s, node := range servers {
		p := waitPod(ctx, t, cs, ns.Name, s, corev1.PodRunning)
		want := podCIDR(1)
		if node == n2 {
			want = podCIDR(2)
		}
		if !want.Contains(net.ParseIP(p.Status.PodIP)) {
			t.Fatalf("%s on %s has IP %s, want one of %s", s, node, p.Status.PodIP, want)
		}
		ips[s] = p.Status.PodIP
	}
	// A CNI's own proxy (Cilium's) translates for the node's cgroup only,
	// not for this test's dial from the node's namespace: its serviceReady
	// waits instead.
	if p, err := clusternet.GetProxy(st.Facts[FactProxy]); err != nil || p.CNI == "" {
		waitDial(ctx, t, st.Nodes[0].NS, net.JoinHostPort(svc.Spec.ClusterIP, "7001"))
	}
	for _, ready := range serviceReady {
		ready(svc.Spec.ClusterIP)
	}
	done := runClients(ctx, t, cs, ns.Name, img, map[string][2]string{
		"same-node-podip":  {n1, ips["srv1"]},
		"cross-node-podip": {n1, ips["srv2"]},
		"cross-clusterip":  {n1, svc.Spec.ClusterIP},
		"same-clusterip":   {n2, svc.Spec.ClusterIP},
	})
	return cs, ns.Name, done
}

// pathServer is a pod of a test's paths: an rr server on TCP 7001 that
// serves its clients' connections at once (--flows). Serving one at a
// time, it leaves a client that connects while another runs waiting in
// the accept queue until that one ends: a one-second client started a
// moment after another gets few transactions or none.
func pathServer(img, name, node string, args ...string) *corev1.Pod {
	return vnetlabPod(img, name, node, corev1.RestartPolicyAlways,
		append([]string{"rr-server", "--proto", "tcp", "--port", "7001", "--flows", strconv.Itoa(rrbench.MaxFlows)}, args...)...)
}

// vnetlabPod is a pod of vnetlab's image img on node running vnetlab args,
// labelled app=name.
func vnetlabPod(img, name, node string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": node}, RestartPolicy: restart, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "c", Image: img, ImagePullPolicy: corev1.PullNever, Command: append([]string{image.VnetlabPath}, args...)}}}}
}

// runClients runs an rr client pod per entry (name: {node, server
// address}) to port 7001 for a second, fails the test for each that does
// not succeed or completes no transaction, and returns each one's
// transactions (from the report in its log).
func runClients(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, img string, clients map[string][2]string) map[string]uint64 {
	t.Helper()
	for c, to := range clients {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, vnetlabPod(img, c, to[0], corev1.RestartPolicyNever, "rr-client", "--proto", "tcp", "--addr", net.JoinHostPort(to[1], "7001"), "--duration", "1s", "-o", "json"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	done := map[string]uint64{}
	for c, to := range clients {
		if p := waitPod(ctx, t, cs, ns, c, corev1.PodSucceeded); p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("%s: client on %s to %s ended %s", c, to[0], to[1], p.Status.Phase)
			continue
		}
		log, err := cs.CoreV1().Pods(ns).GetLogs(c, &corev1.PodLogOptions{}).DoRaw(ctx)
		var rep rrbench.Report
		if err == nil {
			err = json.Unmarshal(log, &rep)
		}
		if err != nil || rep.Transactions == 0 {
			t.Errorf("%s: client on %s to %s: %d transactions (%v): %s", c, to[0], to[1], rep.Transactions, err, log)
		}
		done[c] = rep.Transactions
	}
	return done
}

// waitPod waits until a pod is in phase want (or has failed) and returns it.
func waitPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string, want corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	err := waitFor(ctx, 2*time.Minute, "pod "+name+" to be "+string(want), func() bool {
		var err error
		p, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && (p.Status.Phase == want || p.Status.Phase == corev1.PodFailed) && (want != corev1.PodRunning || p.Status.PodIP != "")
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// podLinks lists the plugin's pod links still in the nodes ("" = none).
func podLinks(st *lab.State) string {
	var left []string
	for _, n := range st.Nodes {
		h, err := nsutil.Handle(n.NS)
		if err != nil {
			continue
		}
		ls, _ := h.LinkList()
		h.Close()
		for _, l := range ls {
			if strings.HasPrefix(l.Attrs().Name, "vnl") && len(l.Attrs().Name) == len(cni.HostIfname("x", "eth0")) {
				left = append(left, fmt.Sprintf("%s in %s", l.Attrs().Name, n.Name))
			}
		}
	}
	return strings.Join(left, ", ")
}

// vnetlab's CNI in mode veth-ebpf with vnetlab's eBPF Service proxy: one
// eBPF plane per node. The CNI's host-routing programs on every pod are the
// only programs (placement routed), the proxy fills the Service maps of
// that same plane, and the ClusterIPs are translated there: the plane's
// DNAT counter rises, same-node traffic is delivered by bpf_redirect_peer,
// no kube-proxy runs. Pods reach each other and a ClusterIP (TCP and UDP)
// on the same node and across nodes; `kube down` leaves nothing.
// VNETLAB_CNI_PROXY_MODES=veth-routed,bridge runs the same with those modes
// too (the proxy then attaches its programs to the CNI's vnl... veths).
func TestVnetlabCNIWithEBPFProxy(t *testing.T) {
	needCluster(t)
	modes := []string{modes.VethEBPF}
	if m := os.Getenv("VNETLAB_CNI_PROXY_MODES"); m != "" {
		modes = append(modes, strings.Split(m, ",")...)
	}
	for i, mode := range modes {
		t.Run(mode, func(t *testing.T) { cniWithEBPFProxy(t, fmt.Sprintf("vke%d", i), mode) })
	}
}

func cniWithEBPFProxy(t *testing.T, name, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	st := upTestCluster(ctx, t, Spec{Name: name, Nodes: 2, Proxy: "vnetlab-ebpf", CNI: clusternet.CNIVnetlab, CNIMode: mode}, nil)
	cs, err := Client(st.Facts[FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	ns := testNamespace(ctx, t, cs, "ebpf-test")
	pod := func(name string, node int, args ...string) *corev1.Pod {
		return testPod(st, name, node, map[string]string{"app": name}, args...)
	}
	whoami := []string{"whoami", "--tcp", "8080", "--udp", "5353"}
	for _, p := range []*corev1.Pod{pod("srv1", 1, whoami...), pod("srv2", 2, whoami...), pod("cli", 1)} {
		if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	vips := map[string]string{}
	for _, s := range []string{"srv1", "srv2"} {
		svc, err := cs.CoreV1().Services(ns.Name).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": s}, Ports: []corev1.ServicePort{
				{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "udp", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vips[s] = svc.Spec.ClusterIP
	}
	ips := map[string]string{}
	for _, s := range []string{"srv1", "srv2", "cli"} {
		ips[s] = waitPod(ctx, t, cs, ns.Name, s, corev1.PodRunning).Status.PodIP
	}
	cli := podNetnsHolding(t, st.Name, ips["cli"])
	plane, err := tcbpf.Open(NodePlane(name, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer plane.Close()
	// The cluster is IPv4: whichever of the proxy and the CNI made the
	// node's plane made its IPv6 maps with one entry (tcbpf.OpenFamily).
	if plane.HasIPv6() {
		t.Errorf("node 1's plane %s has its IPv6 maps at full size on an IPv4 cluster", plane.Dir())
	}
	// So did the enforcer with its policy plane's (polbpf.OpenFamily).
	pol6, err := ebpf.LoadPinnedMap(filepath.Join(netpolicy.PlaneDir(NodePlane(name, 1)), "pol6_flows"), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("node 1's policy plane: %v", err)
	}
	if n := pol6.MaxEntries(); n != 1 {
		t.Errorf("node 1's pol6_flows has %d entries on an IPv4 cluster, want 1", n)
	}
	pol6.Close()
	// The planes' maps are the proxy's, the CNI's routing and the
	// enforcer's (vnetlab's, the default here), each told apart, none
	// unknown: kube converge's memory column is the proxy's part.
	parts, err := PlaneMapBytes(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the planes' eBPF maps, bytes: %v", parts)
	for _, part := range []string{results.MapPartProxy, results.MapPartRouting, results.MapPartPolicy} {
		if parts[part] <= 0 {
			t.Errorf("the planes' eBPF maps %v: want some of %q", parts, part)
		}
	}
	if b, ok := parts[results.MapPartOther]; ok {
		t.Errorf("the planes' eBPF maps %v: %d bytes of maps of no known part, want none", parts, b)
	}
	if parts[results.MapPartProxy] <= parts[results.MapPartRouting] {
		t.Errorf("the planes' eBPF maps %v: want the proxy's the most", parts)
	}
	before, _ := plane.Stats()
	hostBefore, _ := plane.HostStats()
	for _, c := range []struct{ what, proto, addr, want string }{
		{"same-node pod IP", "tcp", net.JoinHostPort(ips["srv1"], "8080"), "srv1"},
		{"cross-node pod IP", "tcp", net.JoinHostPort(ips["srv2"], "8080"), "srv2"},
		{"same-node ClusterIP", "tcp", net.JoinHostPort(vips["srv1"], "80"), "srv1"},
		{"same-node ClusterIP", "udp", net.JoinHostPort(vips["srv1"], "53"), "srv1"},
		{"cross-node ClusterIP", "tcp", net.JoinHostPort(vips["srv2"], "80"), "srv2"},
		{"cross-node ClusterIP", "udp", net.JoinHostPort(vips["srv2"], "53"), "srv2"},
	} {
		var got string
		var err error
		// The proxy programs a Service a moment after its endpoint is ready.
		if waitFor(ctx, 30*time.Second, c.what, func() bool { got, err = whoAnswers(cli, c.proto, c.addr); return err == nil && got == c.want }) != nil {
			t.Errorf("%s %s %s from cli: answered %q (%v), want %q", c.what, c.proto, c.addr, got, err, c.want)
		}
	}
	after, _ := plane.Stats()
	hostAfter, _ := plane.HostStats()
	if after.DNAT < before.DNAT+4 || after.RNAT < before.RNAT+4 {
		t.Errorf("node 1's plane translated %d packets and %d replies: the ClusterIPs did not go through the CNI's plane", after.DNAT-before.DNAT, after.RNAT-before.RNAT)
	}
	// One program set per pod: with veth-ebpf the CNI's (host routing,
	// the proxy attached nothing), else the proxy's on the CNI's veths.
	want := tcbpf.NodeSide
	if mode == modes.VethEBPF {
		want = tcbpf.Routed
		if hostAfter.Redirected <= hostBefore.Redirected {
			t.Errorf("no packet was delivered by bpf_redirect_peer on node 1")
		}
	}
	eps, err := plane.ListEndpoints()
	if err != nil || len(eps) < 2 {
		t.Fatalf("node 1's endpoints: %v (%v), want one on each of its pods", eps, err)
	}
	for _, ep := range eps {
		if ep.Placement != want || !strings.HasPrefix(ep.Ifname, cni.HostIfPrefix) {
			t.Errorf("endpoint %s placement %s on node 1, want %s on the CNI's %s... veths", ep.Ifname, ep.Placement, want, cni.HostIfPrefix)
		}
	}
	for _, pid := range ProcessesMentioning("kube-proxy.yaml") {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), lab.Dir(name)) {
			t.Errorf("a kube-proxy runs for the cluster (pid %d)", pid)
		}
	}
}

// podNetnsHolding finds the network namespace (under the cluster's
// containerd state) of the pod with address ip.
func podNetnsHolding(t *testing.T, cluster, ip string) string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(lab.Dir(cluster), "*", "containerd", "state", "*", "netns", "*"))
	for _, p := range paths {
		found := false
		_ = nsutil.DoPath(p, func() error {
			addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
			for _, a := range addrs {
				found = found || a.IP.String() == ip
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

// whoAnswers asks addr (tcp or udp) from namespace ns which pod answers (a
// whoami backend).
func whoAnswers(ns, proto, addr string) (string, error) {
	return whoAnswersWithin(ns, proto, addr, 2*time.Second)
}

// whoAnswersWithin is whoAnswers waiting at most limit for the connection
// and again for the answer.
func whoAnswersWithin(ns, proto, addr string, limit time.Duration) (string, error) {
	var out string
	err := nsutil.DoPath(ns, func() error {
		c, err := net.DialTimeout(proto, addr, limit)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(limit))
		if proto == "udp" {
			if _, err := c.Write([]byte("?")); err != nil {
				return err
			}
		}
		buf := make([]byte, 256)
		n, err := c.Read(buf)
		out = strings.TrimSpace(string(buf[:n]))
		return err
	})
	return out, err
}

// testPod is a pod of cluster st's vnetlab image on node (1-based) with
// labels, running `vnetlab args...` (none: the image's own command).
func testPod(st *lab.State, name string, node int, labels map[string]string, args ...string) *corev1.Pod {
	zero := int64(0)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"kubernetes.io/hostname": st.Nodes[node-1].Name}, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "c", Image: st.Facts[FactImage], ImagePullPolicy: corev1.PullNever}}}}
	if len(args) > 0 {
		p.Spec.Containers[0].Command = append([]string{image.VnetlabPath}, args...)
	}
	return p
}

// testNamespace creates namespace name and waits for its default
// ServiceAccount, which a pod needs before it can be created.
func testNamespace(ctx context.Context, t *testing.T, cs kubernetes.Interface, name string) *corev1.Namespace {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(ctx, time.Minute, "the namespace's default ServiceAccount", func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		t.Fatal(err)
	}
	return ns
}

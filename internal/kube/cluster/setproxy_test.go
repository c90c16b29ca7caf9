package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/vnetlab/vnetlab/internal/datapath/sock"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// switchWhoEnv makes this test binary a client (TestMain): "PROTO ADDR";
// it prints which backend answered. Started in a pod's namespace and
// cgroup, it is one of the pod's processes for the socket programs.
const switchWhoEnv = "VNETLAB_TEST_SWITCH_WHO"

// switchWhoChild is that client.
func switchWhoChild(how string) int {
	proto, addr, _ := strings.Cut(how, " ")
	c, err := net.DialTimeout(proto, addr, 2*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if proto == "udp" {
		if _, err := c.Write([]byte("?")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(strings.TrimSpace(string(buf[:n])))
	return 0
}

// A running cluster's Service proxy switched in place, through every
// proxy in turn: iptables -> nftables -> vnetlab-ebpf -> vnetlab-ebpf with
// socket LB -> vnetlab-sock -> iptables, on one 2-node cluster of
// vnetlab's CNI in mode veth-ebpf without an enforcer, holding 200 kept
// extra Services and a TCP+UDP Service of two backends (one per node).
// After each switch: the facts name the new proxy (and proxy_since); each
// node runs one proxy, the new kind, the old PIDs gone; nothing of
// another proxy is left (ProxyLeftovers, and directly: kube-proxy's
// tables and chains, the socket programs' and NodePort pins, the Service
// maps, host_via_stack_on); all N are programmed (KUBE-SVC- chains,
// service-ips elements or map entries), the Services' UIDs unchanged; the
// client pod on node 1 reaches both backends over TCP and UDP, and the
// counters say who translated (tc DNAT under vnetlab-ebpf, the socket
// programs' connects with socket LB and vnetlab-sock, a netfilter DNAT
// entry in node 1's conntrack under kube-proxy with tc's count still).
// Then a set-proxy killed after it stopped the proxies leaves the cluster
// switching-proxy: Load and kube converge refuse it, a second set-proxy
// completes it. kube down leaves nothing (upTestCluster).
func TestProxySwitch(t *testing.T) {
	needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	const name = "vps"
	st := upTestCluster(ctx, t, Spec{Name: name, Nodes: 2, Proxy: clusternet.IPTables, CNI: clusternet.CNIVnetlab, CNIMode: "veth-ebpf", NetworkPolicy: clusternet.PolicyNone}, nil)
	cs, err := Client(st.Facts[FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Facts[FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	extra, err := measure.KeptExtraServices(ctx, cfg, 200, 1, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	uids := func() map[string]types.UID {
		l, err := cs.CoreV1().Services(extra.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]types.UID{}
		for _, s := range l.Items {
			out[s.Name] = s.UID
		}
		return out
	}
	uidsBefore := uids()
	if len(uidsBefore) != 200 {
		t.Fatalf("%d extra Services, want 200", len(uidsBefore))
	}

	// Two backends (one per node) behind one TCP+UDP Service, a client on node 1.
	ns := testNamespace(ctx, t, cs, "switch-test")
	pod := func(pname string, node int, role string, args ...string) *corev1.Pod {
		return testPod(st, pname, node, map[string]string{"role": role}, args...)
	}
	whoami := []string{"whoami", "--tcp", "8080", "--udp", "5353"}
	for _, p := range []*corev1.Pod{pod("srv1", 1, "srv", whoami...), pod("srv2", 2, "srv", whoami...), pod("cli", 1, "cli")} {
		if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := cs.CoreV1().Services(ns.Name).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "srv"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"role": "srv"}, Ports: []corev1.ServicePort{
			{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "udp", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vip := svc.Spec.ClusterIP
	backends := map[string]string{}
	for _, s := range []string{"srv1", "srv2"} {
		backends[waitPod(ctx, t, cs, ns.Name, s, corev1.PodRunning).Status.PodIP] = s
	}
	cliNS := podNetnsHolding(t, name, waitPod(ctx, t, cs, ns.Name, "cli", corev1.PodRunning).Status.PodIP)
	cliCg, err := cgroup.PodOf(cliNS)
	if err != nil {
		t.Fatal(err)
	}
	plane1 := NodePlane(name, 1)
	node1 := st.Nodes[0].NS
	asks := 0
	// bothAnswer: the cli pod reaches both backends through the Service,
	// over proto, within a minute (the new proxy has synced; the answers
	// only need new flows).
	bothAnswer := func(step, proto, port string) {
		t.Helper()
		seen := map[string]bool{}
		var last string
		_ = waitFor(ctx, time.Minute, step+": both backends over "+proto, func() bool {
			asks++
			got, err := switchWho(ctx, cliNS, cliCg, proto, net.JoinHostPort(vip, port))
			if err != nil {
				last = err.Error()
			} else {
				seen[got] = true
			}
			return seen["srv1"] && seen["srv2"]
		})
		if !seen["srv1"] || !seen["srv2"] {
			t.Errorf("%s: cli -> %s %s:%s answered by %v (last error %q), want srv1 and srv2", step, proto, vip, port, seen, last)
		}
	}

	steps := []struct {
		proxy    string
		socketLB bool
	}{{clusternet.NFTables, false}, {clusternet.VnetlabEBPF, false}, {clusternet.VnetlabEBPF, true}, {clusternet.VnetlabSock, false}, {clusternet.IPTables, false}}
	check := func(step string, want clusternet.Network) {
		t.Helper()
		cur, err := Load(name)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got := Network(cur); got.Proxy != want.Proxy || got.SocketLB != want.SocketLB || got.Policy != clusternet.PolicyNone || got.CNIMode != "veth-ebpf" {
			t.Errorf("%s: the facts say %+v", step, got)
		}
		if left := ProxyLeftovers(ctx, cur, want); left != "" {
			t.Errorf("%s: left %s", step, left)
		}
		vnetlab := clusternet.IsVnetlab(want.Proxy)
		for i, n := range cur.Nodes {
			plane := NodePlane(name, i+1)
			tables, _ := proc.Command(ctx, n.NS, "nft", "list", "tables").Output()
			if strings.Contains(string(tables), "kube-proxy") != (want.Proxy == clusternet.NFTables) {
				t.Errorf("%s: node %s's nftables tables:\n%s", step, n.Name, tables)
			}
			saved, _ := proc.Command(ctx, n.NS, "iptables-save").Output()
			svcChains := strings.Count(string(saved), "\n:KUBE-SVC-")
			if (svcChains > 0) != (want.Proxy == clusternet.IPTables) {
				t.Errorf("%s: node %s has %d KUBE-SVC- chains", step, n.Name, svcChains)
			}
			for _, sub := range []string{sock.LinksDir, tcbpf.UplinksDir} {
				if k := pinsUnder(filepath.Join(tcbpf.PinDir(plane), sub)); (k > 0) != vnetlab {
					t.Errorf("%s: node %s has %d pins under %s", step, n.Name, k, sub)
				}
			}
			entries, err := tcbpf.ServiceEntries(plane)
			if err != nil || (entries > 0) != vnetlab {
				t.Errorf("%s: node %s's Service maps hold %d entries (%v)", step, n.Name, entries, err)
			}
			if on, err := tcbpf.ViaStackOn(plane); vnetlab && (on || err != nil) {
				t.Errorf("%s: node %s's host_via_stack_on is set (%v)", step, n.Name, err)
			}
			// All N are there, under the proxy's own name for them.
			var n200 int
			switch want.Proxy {
			case clusternet.IPTables:
				n200 = svcChains
			case clusternet.NFTables:
				m, _ := proc.Command(ctx, n.NS, "nft", "list", "map", "ip", "kube-proxy", "service-ips").Output()
				n200 = strings.Count(string(m), "goto service-")
			default:
				n200 = entries
			}
			if n200 < 200 {
				t.Errorf("%s: node %s programs %d Service ports, want the 200 extra ones at least", step, n.Name, n200)
			}
		}
		// kube converge's memory column: the CNI's maps are no proxy's under kube-proxy.
		if parts, err := PlaneMapBytes(name); err != nil || (parts[results.MapPartProxy] > 0) != vnetlab {
			t.Errorf("%s: the planes' maps by part %v (%v)", step, parts, err)
		}
		for k, uid := range uids() {
			if uidsBefore[k] != uid {
				t.Errorf("%s: Service %s's UID changed (%s, was %s)", step, k, uid, uidsBefore[k])
			}
		}
	}

	// The starting proxy (kube up's), then every switch.
	check("kube up's iptables", clusternet.Network{Proxy: clusternet.IPTables})
	bothAnswer("kube up's iptables", "tcp", "80")
	for _, s := range steps {
		want := clusternet.Network{Proxy: s.proxy, SocketLB: s.socketLB}
		step := "to " + want.ProxyText()
		old := ProxyPIDs(name)
		sw, err := SetProxy(ctx, name, s.proxy, s.socketLB, 5*time.Minute, t.Logf)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		t.Logf("%s: %s -> %s in %s, %d Services, nodes %+v", step, sw.From, sw.To, sw.Took.Round(time.Millisecond), sw.Services, sw.Nodes)
		if sw.To != want.ProxyText() || len(sw.Nodes) != 2 || sw.Services < 200 {
			t.Errorf("%s: switch %+v", step, sw)
		}
		cur, _ := Load(name)
		if cur == nil || cur.Facts[FactProxySince] == "" {
			t.Errorf("%s: no %s fact", step, FactProxySince)
		}
		for node, pid := range ProxyPIDs(name) {
			if old[node] == pid {
				t.Errorf("%s: node %s's proxy is the old one (pid %d)", step, node, pid)
			}
		}
		check(step, want)
		dnat := func() uint64 { c, _ := tcbpf.ReadCounters(plane1); return c.IPv4.DNAT }
		connects := func() uint64 {
			if s, _ := sock.ReadStats(plane1); s != nil {
				return s.Connects
			}
			return 0
		}
		dnat0, conn0, asks0 := dnat(), connects(), asks
		bothAnswer(step, "tcp", "80")
		tcpAsks := asks - asks0
		bothAnswer(step, "udp", "53")
		dnat1, conn1 := dnat(), connects()
		t.Logf("%s: %d asks; node 1's tc DNAT +%d, socket connects +%d", step, asks-asks0, dnat1-dnat0, conn1-conn0)
		switch {
		case s.proxy == clusternet.VnetlabEBPF && !s.socketLB:
			if dnat1-dnat0 < uint64(asks-asks0) {
				t.Errorf("%s: node 1's tc programs translated %d packets for %d asks", step, dnat1-dnat0, asks-asks0)
			}
		case s.socketLB || s.proxy == clusternet.VnetlabSock:
			if conn1-conn0 < uint64(tcpAsks) {
				t.Errorf("%s: the socket programs translated %d connects for %d TCP asks", step, conn1-conn0, tcpAsks)
			}
			if s.proxy == clusternet.VnetlabSock && dnat1-dnat0 >= uint64(asks-asks0) {
				t.Errorf("%s: node 1's tc programs translated %d packets for %d asks: not the sockets alone", step, dnat1-dnat0, asks-asks0)
			}
		default: // kube-proxy
			if dnat1 != dnat0 {
				t.Errorf("%s: node 1's tc programs translated %d packets under kube-proxy", step, dnat1-dnat0)
			}
			if !netfilterDNAT(t, node1, vip, backends) {
				t.Errorf("%s: no conntrack entry in node 1 translates %s to a backend", step, vip)
			}
		}
	}

	// A set-proxy killed after it stopped the proxies: the cluster stays
	// switching-proxy, refused until a set-proxy completes it.
	killedSwitch(t, name, "node "+NodeName(name, 1)+": cleaning")
	if _, err := Load(name); err == nil || !strings.Contains(err.Error(), "set-proxy --cluster "+name+" --proxy nftables") {
		t.Errorf("after a killed set-proxy: Load says %v, want a refusal naming the set-proxy that completes it", err)
	}
	if log, err := vnetlab(t, time.Minute, "kube", "converge", "--cluster", name, "--changes", "5"); err == nil || !strings.Contains(log, "switching its Service proxy") {
		t.Errorf("kube converge on a cluster mid-switch: %v\n%s", err, log)
	}
	if _, err := SetProxy(ctx, name, clusternet.NFTables, false, 5*time.Minute, t.Logf); err != nil {
		t.Fatalf("completing the killed switch: %v", err)
	}
	check("after the killed switch, completed", clusternet.Network{Proxy: clusternet.NFTables})
	bothAnswer("after the killed switch", "tcp", "80")
}

// killedSwitch runs `vnetlab kube set-proxy --cluster name --proxy
// nftables` and kills it (SIGKILL) once its output holds marker.
func killedSwitch(t *testing.T, name, marker string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "log")
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.Command(os.Getenv("VNETLAB_BIN"), "kube", "set-proxy", "--cluster", name, "--proxy", clusternet.NFTables)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitErr := waitFor(context.Background(), 2*time.Minute, "set-proxy to start cleaning", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), marker)
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if log, _ := os.ReadFile(logPath); waitErr != nil {
		t.Fatalf("%v:\n%s", waitErr, log)
	}
}

// switchWho asks addr which backend answers, from a process of this test
// binary in the pod namespace ns and cgroup cg.
func switchWho(ctx context.Context, ns, cg, proto, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	c := proc.Command(ctx, ns, exe)
	c.Env = append(os.Environ(), switchWhoEnv+"="+proto+" "+addr)
	if err := c.InCgroup(cg); err != nil {
		return "", err
	}
	out, err := c.Output()
	return strings.TrimSpace(string(out)), err
}

// netfilterDNAT says whether node namespace ns's conntrack holds an entry
// of a flow to vip whose reply comes from one of backends (netfilter's
// DNAT of the Service: kube-proxy's).
func netfilterDNAT(t *testing.T, ns, vip string, backends map[string]string) bool {
	t.Helper()
	var flows []*netlink.ConntrackFlow
	err := nsutil.Do(ns, func() error {
		var err error
		flows, err = netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
		return err
	})
	if err != nil {
		t.Errorf("node conntrack: %v", err)
		return false
	}
	for _, f := range flows {
		if f.Forward.DstIP.String() == vip && backends[f.Reverse.SrcIP.String()] != "" {
			return true
		}
	}
	return false
}

// A switch on a CNI whose pods vnetlab-ebpf programs itself (Debian's
// bridge, one node): vnetlab-ebpf -> nftables takes the pods' tc programs
// off and removes the proxy's plane once nothing uses it (SetProxy's
// ProxyLeftovers refuses the switch while either is left; the plane's
// pins are checked here too), and nftables -> vnetlab-ebpf makes them
// again. Cluster DNS answers through each new proxy (SetProxy waits for
// it).
func TestProxySwitchOwnPlane(t *testing.T) {
	needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const name = "vpo"
	upTestCluster(ctx, t, Spec{Name: name, Nodes: 1, Proxy: clusternet.VnetlabEBPF}, nil)
	pins := tcbpf.PinDir(ProxyPlane(name, name+"-node1"))
	if !exists(pins) {
		t.Fatalf("vnetlab-ebpf's plane %s is missing before the switch", pins)
	}
	for _, to := range []string{clusternet.NFTables, clusternet.VnetlabEBPF} {
		sw, err := SetProxy(ctx, name, to, false, 0, t.Logf)
		if err != nil {
			t.Fatalf("to %s: %v", to, err)
		}
		t.Logf("%s -> %s in %s", sw.From, sw.To, sw.Took.Round(time.Millisecond))
		if got, want := exists(pins), to == clusternet.VnetlabEBPF; got != want {
			t.Errorf("under %s: the plane's pins %s there %t, want %t", to, pins, got, want)
		}
	}
}

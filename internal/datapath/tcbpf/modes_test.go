package tcbpf_test

// Integration tests of the eBPF modes (lab names start with "fa"): real
// veth-ebpf and macvlan-ebpf labs, pod-to-pod and pod-to-service over TCP
// and UDP, hairpin, proof that the node's stack was bypassed (counters of
// the node's own iptables rules stay still while the programs' rise), and
// nothing left after down.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// upModeLab builds a 4-pod lab of an eBPF mode with echo servers in every
// pod; down runs when the test ends, pass or fail.
func upModeLab(t *testing.T, prefix, mode string) *testLab {
	t.Helper()
	return upModeLabFamily(t, prefix, mode, family.IPv4)
}

// upModeLabFamily is upModeLab with pods of family fam (echo servers on
// each of its families).
func upModeLabFamily(t *testing.T, prefix, mode string, fam family.Family) *testLab {
	t.Helper()
	return newTestLab(t, lab.Spec{Name: fmt.Sprintf("%s%d", prefix, os.Getpid()%10000), Mode: mode, Family: fam}, true)
}

// addEchoServices: 10.96.0.100:5201 tcp and udp -> pod-a:5201.
func addEchoServices(t *testing.T, tl *testLab, p *dp.Plane) {
	t.Helper()
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		if err := p.AddService(dp.Service{VIP: vip, Port: testPort, Proto: proto, Backends: []dp.Backend{{IP: tl.addr("pod-a"), Port: testPort}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// iptablesPackets sums the packet counters of a chain in a namespace.
func iptablesPackets(t *testing.T, ns, table, chain string) uint64 {
	t.Helper()
	out, err := proc.Command(context.Background(), ns, "iptables", "-t", table, "-L", chain, "-v", "-x", "-n").Output()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, line := range strings.Split(string(out), "\n")[2:] {
		if f := strings.Fields(line); len(f) > 2 {
			v, err := strconv.ParseUint(f[0], 10, 64)
			if err == nil {
				n += v
			}
		}
	}
	return n
}

var ttlRE = regexp.MustCompile(`ttl=(\d+)`)

// pingTTL pings once and returns the TTL of the reply.
func pingTTL(t *testing.T, ns, addr string) int {
	t.Helper()
	out, err := proc.Command(context.Background(), ns, "ping", "-c", "1", "-W", "2", addr).Output()
	if err != nil {
		t.Fatalf("ping %s from %s: %v\n%s", addr, ns, err, out)
	}
	m := ttlRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("ping %s: no ttl in %q", addr, out)
	}
	ttl, _ := strconv.Atoi(m[1])
	return ttl
}

// podTraffic checks pod-to-pod and pod-to-service, TCP and UDP, and
// hairpin, from pod-b (and pod-a for hairpin) to pod-a's echo servers.
func podTraffic(t *testing.T, tl *testLab) {
	t.Helper()
	a, b := tl.pod("pod-a"), tl.pod("pod-b")
	podAddr := a.IP + ":5201"
	for _, target := range []string{podAddr, svcAddr} {
		ans, err := tcpOnce(b.NS, target)
		if err != nil || ans.pod != "pod-a" || !strings.HasPrefix(ans.peer, b.IP+":") {
			t.Fatalf("tcp pod-b -> %s: %+v, %v (want pod-a seeing %s)", target, ans, err, b.IP)
		}
		ans, from, err := udpOnce(b.NS, target)
		if err != nil || ans.pod != "pod-a" || from != target {
			t.Fatalf("udp pod-b -> %s: %+v from %s, %v (want pod-a answering from %s)", target, ans, from, err, target)
		}
	}
	// Other pairs, both ways: every pod reaches every other.
	for _, pair := range [][2]string{{"pod-c", "pod-d"}, {"pod-d", "pod-c"}, {"pod-a", "pod-c"}} {
		ans, err := tcpOnce(tl.pod(pair[0]).NS, tl.pod(pair[1]).IP+":5201")
		if err != nil || ans.pod != pair[1] {
			t.Fatalf("tcp %s -> %s: %+v, %v", pair[0], pair[1], ans, err)
		}
	}
	// Hairpin: pod-a reaches its own service, seen from 169.254.42.1.
	ans, err := tcpOnce(a.NS, svcAddr)
	if err != nil || ans.pod != "pod-a" || !strings.HasPrefix(ans.peer, dp.HairpinIP+":") {
		t.Fatalf("hairpin tcp: %+v, %v (want pod-a seeing %s)", ans, err, dp.HairpinIP)
	}
	ans, from, err := udpOnce(a.NS, svcAddr)
	if err != nil || ans.pod != "pod-a" || from != svcAddr {
		t.Fatalf("hairpin udp: %+v from %s, %v", ans, from, err)
	}
}

// TestVethEBPFLab: host routing on a real lab. Pod-to-pod and clusterIP
// traffic works over TCP and UDP, hairpin too, the TTL drops by one as
// through a router, and the node's FORWARD chain sees none of it while
// bpf_redirect_peer's counter rises. Traffic to the node and beyond still
// takes the stack.
func TestVethEBPFLab(t *testing.T) { testHostRoutingLab(t, "fav", modes.VethEBPF) }

// TestNetkitEBPFLab: the same on netkit pairs (kernel 6.7+; the
// stock-kernel harness runs it on Debian's 6.12 under qemu).
func TestNetkitEBPFLab(t *testing.T) {
	m, err := modes.Get(modes.NetkitEBPF)
	if err != nil {
		t.Fatal(err)
	}
	if err := modes.Available(m); err != nil {
		if kernel.GuestHas(modes.NetkitEBPF) {
			t.Fatalf("the guest kernel has netkit: %v", err)
		}
		t.Skipf("netkit-ebpf unavailable here: %v", err)
	}
	testHostRoutingLab(t, "fan", modes.NetkitEBPF)
}

func testHostRoutingLab(t *testing.T, prefix, mode string) {
	tl := upModeLab(t, prefix, mode)
	node := tl.st.Nodes[0].NS
	p := openPlane(t, tl)
	addEchoServices(t, tl, p)
	for _, pod := range tl.st.Pods {
		if n := countAttached(t, tl, pod.Name, dp.Routed); n != 2 {
			t.Fatalf("%s: %d programs on the node end of its pair, want 2", pod.Name, n)
		}
	}
	routes, err := p.Routes()
	if err != nil || len(routes) != 4 {
		t.Fatalf("routes %+v, %v: want one per pod", routes, err)
	}
	eps, err := p.ListEndpoints()
	if err != nil || len(eps) != 4 || eps[0].Placement != dp.Routed || !eps[0].Attached {
		t.Fatalf("endpoints %+v, %v", eps, err)
	}

	fwd := iptablesPackets(t, node, "filter", "FORWARD")
	before, _ := p.HostStats()
	podTraffic(t, tl)
	// An ICMP error from the backend (port unreachable) is translated back
	// at the backend's veth and delivered: the client's socket hears it.
	if err := p.AddService(dp.Service{VIP: vip, Port: 5301, Proto: dp.UDP, Backends: []dp.Backend{{IP: tl.addr("pod-a"), Port: 5399}}}); err != nil {
		t.Fatal(err)
	}
	if ok, err := udpRefused(tl.pod("pod-b").NS, closedAddr); err != nil || !ok {
		t.Fatalf("udp to a closed backend port: refused=%v, %v", ok, err)
	}
	if ttl := pingTTL(t, tl.pod("pod-b").NS, tl.pod("pod-a").IP); ttl != 63 {
		t.Fatalf("ping pod-b -> pod-a: reply TTL %d, want 63 (64 minus one routing hop)", ttl)
	}
	after, _ := p.HostStats()
	t.Logf("host routing: %+v -> %+v; node FORWARD packets %d -> %d", before, after, fwd, iptablesPackets(t, node, "filter", "FORWARD"))
	if after.Redirected-before.Redirected < 40 {
		t.Fatalf("only %d packets took bpf_redirect_peer", after.Redirected-before.Redirected)
	}
	if got := iptablesPackets(t, node, "filter", "FORWARD"); got != fwd {
		t.Fatalf("the node's FORWARD chain saw %d pod-to-pod packets: the fast path was not taken", got-fwd)
	}
	// The node and the outside world: through the node's stack, as before.
	pingTTL(t, tl.pod("pod-b").NS, tl.st.Nodes[0].IP)
	pingTTL(t, tl.pod("pod-b").NS, "10.10.0.1")
	pingTTL(t, node, tl.pod("pod-a").IP)
	if hs, _ := p.HostStats(); hs.Stack == after.Stack {
		t.Fatalf("host stats %+v: traffic to the node and beyond was not left to the stack", hs)
	}
	if st, _ := p.Stats(); st.Errors != 0 || st.DNAT == 0 || st.RNAT == 0 || st.Hairpin == 0 || st.ICMP == 0 {
		t.Fatalf("service stats %+v", st)
	}

	// A pod detached from host routing (ep del) loses its route; traffic to
	// it takes the node's stack again, and still works.
	b := tl.pod("pod-b")
	if err := p.DetachEndpoint(node, tl.hostIf("pod-a")); err != nil {
		t.Fatal(err)
	}
	if rs, _ := p.Routes(); len(rs) != 3 {
		t.Fatalf("after detaching pod-a: routes %+v", rs)
	}
	fwd = iptablesPackets(t, node, "filter", "FORWARD")
	if ans, err := tcpOnce(b.NS, tl.pod("pod-a").IP+":5201"); err != nil || ans.pod != "pod-a" {
		t.Fatalf("tcp to a detached pod: %+v, %v", ans, err)
	}
	if iptablesPackets(t, node, "filter", "FORWARD") == fwd {
		t.Fatal("traffic to a detached pod did not cross the node's FORWARD chain")
	}
	// ep add for it again: back on the fast path.
	ep, err := p.AttachHostRouting(node, tl.pod("pod-a").NS, "eth0")
	if err != nil {
		t.Fatal(err)
	}
	for _, pin := range ep.Pins {
		tl.journal(pin)
	}
	if _, err := p.AttachHostRouting(node, tl.pod("pod-a").NS, "eth0"); err == nil {
		t.Fatal("attaching a pod twice succeeded")
	}
	if _, err := p.AttachHostRouting(node, tl.pod("pod-a").NS, "nope0"); err == nil || !strings.Contains(err.Error(), "nope0") {
		t.Fatalf("a missing interface: %v", err)
	}
	podTraffic(t, tl)
}

// TestMacvlanEBPFLab: the Service programs in each pod translate a
// clusterIP and address the packet to the backend's MAC, so the node's
// MASQUERADE rule (which plain macvlan's clusterIP traffic crosses) never
// sees it.
func TestMacvlanEBPFLab(t *testing.T) {
	tl := upModeLab(t, "fam", "macvlan-ebpf")
	node := tl.st.Nodes[0].NS
	p := openPlane(t, tl)
	addEchoServices(t, tl, p)
	for _, pod := range tl.st.Pods {
		if n := countAttached(t, tl, pod.Name, dp.InPod); n != 2 {
			t.Fatalf("%s: %d programs on its eth0, want 2", pod.Name, n)
		}
	}
	if rs, err := p.Routes(); err != nil || len(rs) != 4 || rs[0].HostIfindex != 0 {
		t.Fatalf("routes %+v, %v: want 4 same-segment pods", rs, err)
	}
	nat := iptablesPackets(t, node, "nat", "POSTROUTING")
	fwd := iptablesPackets(t, node, "filter", "FORWARD")
	podTraffic(t, tl)
	if ttl := pingTTL(t, tl.pod("pod-b").NS, tl.pod("pod-a").IP); ttl != 64 {
		t.Fatalf("ping pod-b -> pod-a: reply TTL %d, want 64 (same segment, no router)", ttl)
	}
	hs, _ := p.HostStats()
	t.Logf("host stats %+v; node nat POSTROUTING %d -> %d, FORWARD %d -> %d", hs, nat,
		iptablesPackets(t, node, "nat", "POSTROUTING"), fwd, iptablesPackets(t, node, "filter", "FORWARD"))
	if hs.L2 < 6 || hs.Redirected != 0 {
		t.Fatalf("host stats %+v: want translated packets addressed by MAC, no redirect", hs)
	}
	if iptablesPackets(t, node, "nat", "POSTROUTING") != nat || iptablesPackets(t, node, "filter", "FORWARD") != fwd {
		t.Fatal("service traffic crossed the node's netfilter")
	}
	if st, _ := p.Stats(); st.Errors != 0 || st.DNAT == 0 || st.RNAT == 0 || st.Hairpin == 0 {
		t.Fatalf("service stats %+v", st)
	}
	// The contrast: without pod-a's MAC in the route map, the translated
	// packet goes to the gateway shim, through the node and its MASQUERADE
	// (plain macvlan's clusterIP path): it still works, seen from the shim.
	if err := p.DelRoute(tl.addr("pod-a")); err != nil {
		t.Fatal(err)
	}
	ans, err := tcpOnce(tl.pod("pod-b").NS, svcAddr)
	if err != nil || ans.pod != "pod-a" || !strings.HasPrefix(ans.peer, tl.st.Gateway+":") {
		t.Fatalf("clusterIP through the node: %+v, %v (want pod-a seeing the shim %s)", ans, err, tl.st.Gateway)
	}
	if iptablesPackets(t, node, "nat", "POSTROUTING") == nat {
		t.Fatal("clusterIP traffic through the shim did not hit the node's MASQUERADE: the check above proves nothing")
	}
}

// TestMacvlanEBPFLab6: on a dual macvlan-ebpf lab, TCP and UDP through an
// IPv6 clusterIP reach the backend addressed by its MAC (from_pod_l2's L2
// rewrite), which sees the client's own address; the node forwards none of
// it (its Ip6OutForwDatagrams stays still).
func TestMacvlanEBPFLab6(t *testing.T) {
	tl := upModeLabFamily(t, "fa6", "macvlan-ebpf", family.Dual)
	node := tl.st.Nodes[0].NS
	p := openPlane(t, tl)
	a6 := netip.MustParseAddr(tl.pod("pod-a").IP6)
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		if err := p.AddService(dp.Service{VIP: vip6, Port: testPort, Proto: proto, Backends: []dp.Backend{{IP: a6, Port: testPort}}}); err != nil {
			t.Fatal(err)
		}
	}
	svc6 := netip.AddrPortFrom(vip6, testPort).String()
	b := tl.pod("pod-b")
	before, _ := p.HostStats()
	fwd := ip6Forwarded(t, node)
	ans, err := tcpOnce(b.NS, svc6)
	if want := "[" + b.IP6 + "]:"; err != nil || ans.pod != "pod-a" || !strings.HasPrefix(ans.peer, want) {
		t.Fatalf("tcp via the IPv6 clusterIP: %+v, %v (want pod-a seeing %s)", ans, err, want)
	}
	ans, from, err := udpOnce(b.NS, svc6)
	if err != nil || ans.pod != "pod-a" || from != svc6 {
		t.Fatalf("udp via the IPv6 clusterIP: %+v from %s, %v (want pod-a answering from %s)", ans, from, err, svc6)
	}
	hs, _ := p.HostStats()
	t.Logf("host stats %+v -> %+v; node Ip6OutForwDatagrams %d -> %d", before, hs, fwd, ip6Forwarded(t, node))
	if hs.L2-before.L2 < 4 {
		t.Fatalf("host stats %+v -> %+v: want the translated packets (TCP's and UDP's) addressed by MAC", before, hs)
	}
	if got := ip6Forwarded(t, node); got != fwd {
		t.Fatalf("the node forwarded %d IPv6 packets: the Service traffic went through it", got-fwd)
	}
}

// ip6Forwarded is a namespace's Ip6OutForwDatagrams (/proc/net/snmp6).
func ip6Forwarded(t *testing.T, ns string) uint64 {
	t.Helper()
	out, err := proc.Command(context.Background(), ns, "cat", "/proc/net/snmp6").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Ip6OutForwDatagrams\s+(\d+)$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no Ip6OutForwDatagrams in %s's /proc/net/snmp6", ns)
	}
	n, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return n
}

// TestEBPFModesLeaveNothing: after down, the programs the lab used are
// gone from the kernel, and so are its pins.
func TestEBPFModesLeaveNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, mode := range []string{"veth-ebpf", "macvlan-ebpf"} {
		t.Run(mode, func(t *testing.T) {
			name := fmt.Sprintf("fac%d", os.Getpid()%10000)
			l, down := testnet.UpLab(t, lab.Spec{Name: name, Mode: mode}, 3)
			pins, progs := labPrograms(t, name)
			if pins != 6 || len(progs) < 2 {
				t.Fatalf("lab %s: %d program pins, %d programs; want 6 pins (2 per pod)", name, pins, len(progs))
			}
			if down(); t.Failed() {
				t.FailNow()
			}
			if _, err := os.Stat(dp.PinDir(name)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("pins left in %s", dp.PinDir(name))
			}
			for _, ns := range l.State.Pods {
				if nsutil.Exists(ns.NS) {
					t.Fatalf("namespace %s left", ns.NS)
				}
			}
			// Programs are freed asynchronously (RCU): wait a little.
			deadline := time.Now().Add(5 * time.Second)
			for {
				left := stillLoaded(progs)
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still in the kernel after down: %v", left)
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
}

// labPrograms reads the programs the eBPF modes pinned in a lab's
// directory: they attach every pod with tc (cls_bpf; tcx would wait for an
// RCU grace period per attach), whose endpoints pin the programs.
func labPrograms(t *testing.T, name string) (pins int, progs map[ebpf.ProgramID]bool) {
	t.Helper()
	progs = map[ebpf.ProgramID]bool{}
	eps, err := os.ReadDir(dp.PinDir(name) + "/endpoints")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eps {
		if !strings.HasSuffix(e.Name(), "@"+string(dp.HookTC)) {
			t.Fatalf("endpoint %s: want the tc hook", e.Name())
		}
		for _, prog := range []string{"from_pod", "to_pod"} {
			p, err := ebpf.LoadPinnedProgram(dp.PinDir(name)+"/endpoints/"+e.Name()+"/"+prog, nil)
			if err != nil {
				t.Fatal(err)
			}
			info, err := p.Info()
			p.Close()
			if err != nil {
				t.Fatal(err)
			}
			id, ok := info.ID()
			if !ok {
				t.Fatal("program info without an ID")
			}
			pins++
			progs[id] = true
		}
	}
	return pins, progs
}

func stillLoaded(progs map[ebpf.ProgramID]bool) []string {
	var left []string
	for id := range progs {
		if p, err := ebpf.NewProgramFromID(id); err == nil {
			p.Close()
			left = append(left, fmt.Sprintf("program %d", id))
		}
	}
	return left
}

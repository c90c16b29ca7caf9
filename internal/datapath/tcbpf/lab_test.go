package tcbpf_test

// Integration tests on a real veth-routed lab (names start with "bp"):
// TCP and UDP through a clusterIP, three backends, hairpin, a service
// deleted under a running connection, pins reused by a later process.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

const testPort = 5201

// testLab is a veth-routed lab with pods a, b, c, d and, if asked, an echo
// server in each pod (TCP and UDP on testPort) that answers "<pod> <peer>".
type testLab struct {
	st      *lab.State
	journal func(path string)
}

func upLab(t *testing.T, name string, echo bool) *testLab {
	t.Helper()
	return upLabFamily(t, name, echo, family.IPv4)
}

// upLabFamily is upLab with pods of family fam (dual: servers on both families).
func upLabFamily(t *testing.T, name string, echo bool, fam family.Family) *testLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (namespaces, eBPF)")
	}
	if dp.Root != lab.BPFRoot {
		t.Fatalf("pin root %s is not internal/platform/lab's %s: teardown would miss the pins", dp.Root, lab.BPFRoot)
	}
	name = fmt.Sprintf("%s%d", name, os.Getpid()%10000)
	// Registered before UpLab's teardown, so it runs after it.
	t.Cleanup(func() {
		if _, err := os.Stat(dp.PinDir(name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pins left in %s after down", dp.PinDir(name))
		}
	})
	return newTestLab(t, lab.Spec{Name: name, Mode: "veth-routed", Family: fam}, echo)
}

// newTestLab builds a 4-pod lab of spec (down when the test ends, pass or
// fail), with echo servers on each of its families when echo.
func newTestLab(t *testing.T, spec lab.Spec, echo bool) *testLab {
	t.Helper()
	l, _ := testnet.UpLab(t, spec, 4)
	for _, p := range l.State.Pods {
		if echo && spec.Family.HasIPv4() {
			serve(t, p.NS, p.Name)
		}
		if echo && spec.Family.HasIPv6() {
			testnet.Serve6(t, p.NS, testPort, p.Name)
		}
	}
	return &testLab{st: l.State, journal: func(p string) { _ = l.Journal().Record(lab.KindPin, p) }}
}

func (tl *testLab) pod(name string) lab.PodState {
	for _, p := range tl.st.Pods {
		if p.Name == name {
			return p
		}
	}
	panic("no pod " + name)
}

func (tl *testLab) addr(name string) netip.Addr { return netip.MustParseAddr(tl.pod(name).IP) }

// hostIf is the node end of a pod's veth (as veth-routed names it).
func (tl *testLab) hostIf(name string) string {
	for i, p := range tl.st.Pods {
		if p.Name == name {
			if strings.HasPrefix(tl.st.Mode, modes.Netkit) {
				return modes.HostIfname("nk-", p.Name, i)
			}
			return modes.HostIfname("veth-", p.Name, i)
		}
	}
	panic("no pod " + name)
}

// endpoint says where a pod's programs go for a placement.
func (tl *testLab) endpoint(pod string, pl dp.Placement) (ns, ifname string) {
	if pl == dp.InPod {
		return tl.pod(pod).NS, "eth0"
	}
	return tl.st.Nodes[0].NS, tl.hostIf(pod)
}

func openPlane(t *testing.T, tl *testLab) *dp.Plane {
	t.Helper()
	p, err := dp.Open(tl.st.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Created() {
		tl.journal(c)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func attach(t *testing.T, tl *testLab, p *dp.Plane, pod string, pl dp.Placement) {
	t.Helper()
	ns, ifn := tl.endpoint(pod, pl)
	ep, err := p.AttachEndpoint(ns, ifn, pl)
	if err != nil {
		t.Fatal(err)
	}
	for _, pin := range ep.Pins {
		tl.journal(pin)
	}
}

// serve runs the shared TCP/UDP servers answering "<pod> <peer>" in namespace ns.
func serve(t *testing.T, ns, pod string) { testnet.Serve(t, ns, testPort, pod) }

// answer is what a server said: its pod name and the peer address it saw.
type answer struct{ pod, peer string }

func parseAnswer(s string) (answer, error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return answer{}, fmt.Errorf("bad answer %q", s)
	}
	return answer{f[0], f[1]}, nil
}

// dialTCP connects from namespace ns, says hello and reads the answer. The
// returned conn stays open (the caller closes it).
func dialTCP(ns, addr string) (net.Conn, answer, error) {
	var c net.Conn
	err := nsutil.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp"+netFamily(addr), addr, 3*time.Second)
		return err
	})
	if err != nil {
		return nil, answer{}, err
	}
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		c.Close()
		return nil, answer{}, err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		c.Close()
		return nil, answer{}, err
	}
	a, err := parseAnswer(line)
	_ = c.SetDeadline(time.Time{})
	return c, a, err
}

// netFamily is "6" for an address:port in brackets (IPv6), else "4".
func netFamily(addr string) string {
	if strings.HasPrefix(addr, "[") {
		return "6"
	}
	return "4"
}

func tcpOnce(ns, addr string) (answer, error) {
	c, a, err := dialTCP(ns, addr)
	if c != nil {
		c.Close()
	}
	return a, err
}

// udpOnce sends one datagram from an unconnected socket in ns and returns
// the answer and the address the answer came from (the clusterIP, if the
// reverse NAT works).
func udpOnce(ns, addr string) (answer, string, error) {
	var pc net.PacketConn
	err := nsutil.Do(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp"+netFamily(addr), ":0")
		return err
	})
	if err != nil {
		return answer{}, "", err
	}
	defer pc.Close()
	to, err := net.ResolveUDPAddr("udp"+netFamily(addr), addr)
	if err != nil {
		return answer{}, "", err
	}
	buf := make([]byte, 512)
	for try := 0; try < 3; try++ { // UDP: the first datagram may wait for ARP
		if _, err := pc.WriteTo([]byte("hello\n"), to); err != nil {
			return answer{}, "", err
		}
		_ = pc.SetReadDeadline(time.Now().Add(time.Second))
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			continue
		}
		a, err := parseAnswer(string(buf[:n]))
		return a, from.String(), err
	}
	return answer{}, "", fmt.Errorf("no UDP answer from %s", addr)
}

var (
	svcAddr    = "10.96.0.100:5201"
	closedAddr = "10.96.0.100:5301" // udp -> pod-a:5399, where nothing listens
)

// udpRefused sends from a connected UDP socket and reports whether the
// socket heard "connection refused": the backend's ICMP port unreachable
// reaches it only if its quoted packet was translated back to the clusterIP.
func udpRefused(ns, addr string) (bool, error) {
	var c net.Conn
	if err := nsutil.Do(ns, func() error {
		var err error
		c, err = net.Dial("udp"+netFamily(addr), addr)
		return err
	}); err != nil {
		return false, err
	}
	defer c.Close()
	buf := make([]byte, 64)
	for try := 0; try < 3; try++ {
		if _, err := c.Write([]byte("anyone?")); err != nil {
			return errors.Is(err, syscall.ECONNREFUSED), nil
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(buf)
		if errors.Is(err, syscall.ECONNREFUSED) {
			return true, nil
		}
	}
	return false, nil
}

// countAttached asks the kernel how many programs sit on a pod's endpoint
// interface: tcx links on both sides plus cls_bpf filters under clsact.
func countAttached(t *testing.T, tl *testLab, pod string, pl dp.Placement) int {
	t.Helper()
	ns, ifn := tl.endpoint(pod, pl)
	n := 0
	err := nsutil.Do(ns, func() error {
		l, err := netlink.LinkByName(ifn)
		if err != nil {
			return err
		}
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			r, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
			if err != nil {
				return err
			}
			n += len(r.Programs)
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fs, err := netlink.FilterList(l, parent)
			if err != nil {
				continue // no clsact qdisc
			}
			n += len(fs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestClusterIPOnLab: for each placement and hook, TCP and UDP from pod-b
// through the clusterIP reach pod-a and the replies carry the clusterIP;
// pod-a reaching its own service (hairpin) works.
func TestClusterIPOnLab(t *testing.T) {
	tl := upLab(t, "bpc", true)
	p := openPlane(t, tl)
	a := tl.addr("pod-a")
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		if err := p.AddService(dp.Service{VIP: vip, Port: testPort, Proto: proto, Backends: []dp.Backend{{IP: a, Port: testPort}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.AddService(dp.Service{VIP: vip, Port: 5301, Proto: dp.UDP, Backends: []dp.Backend{{IP: a, Port: 5399}}}); err != nil {
		t.Fatal(err)
	}
	for _, pl := range []dp.Placement{dp.InPod, dp.NodeSide} {
		for _, hook := range []dp.Hook{dp.HookTCX, dp.HookTC} {
			t.Run(string(pl)+"-"+string(hook), func(t *testing.T) {
				p.Hook = hook
				for _, pod := range []string{"pod-a", "pod-b"} {
					attach(t, tl, p, pod, pl)
				}
				for _, pod := range []string{"pod-a", "pod-b"} {
					if n := countAttached(t, tl, pod, pl); n != 2 {
						t.Fatalf("%s: %d programs attached, want 2", pod, n)
					}
				}
				defer func() {
					for _, pod := range []string{"pod-a", "pod-b"} {
						ns, ifn := tl.endpoint(pod, pl)
						if err := p.DetachEndpoint(ns, ifn); err != nil {
							t.Errorf("detach: %v", err)
						}
						if n := countAttached(t, tl, pod, pl); n != 0 {
							t.Errorf("%s: %d programs still attached after detach", pod, n)
						}
					}
				}()
				eps, err := p.ListEndpoints()
				if err != nil || len(eps) != 2 || !eps[0].Attached || eps[0].Hook != hook || eps[0].Placement != pl {
					t.Fatalf("ListEndpoints = %+v, %v", eps, err)
				}
				b := tl.pod("pod-b")
				ans, err := tcpOnce(b.NS, svcAddr)
				if err != nil {
					t.Fatalf("tcp via clusterIP: %v", err)
				}
				if ans.pod != "pod-a" || !strings.HasPrefix(ans.peer, b.IP+":") {
					t.Fatalf("tcp: answer %+v, want pod-a seeing %s", ans, b.IP)
				}
				ans, from, err := udpOnce(b.NS, svcAddr)
				if err != nil {
					t.Fatalf("udp via clusterIP: %v", err)
				}
				if ans.pod != "pod-a" || from != svcAddr {
					t.Fatalf("udp: answer %+v from %s, want pod-a from %s", ans, from, svcAddr)
				}
				if ok, err := udpRefused(b.NS, closedAddr); err != nil || !ok {
					t.Fatalf("udp to a closed backend port: refused=%v, %v (ICMP error not translated?)", ok, err)
				}
				// Hairpin: pod-a -> its own service -> itself, seen from 169.254.42.1.
				ans, err = tcpOnce(tl.pod("pod-a").NS, svcAddr)
				if err != nil {
					t.Fatalf("hairpin tcp: %v", err)
				}
				if ans.pod != "pod-a" || !strings.HasPrefix(ans.peer, dp.HairpinIP+":") {
					t.Fatalf("hairpin tcp: answer %+v, want pod-a seeing %s", ans, dp.HairpinIP)
				}
				ans, from, err = udpOnce(tl.pod("pod-a").NS, svcAddr)
				if err != nil || ans.pod != "pod-a" || from != svcAddr {
					t.Fatalf("hairpin udp: answer %+v from %s, %v", ans, from, err)
				}
			})
		}
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats: %+v", st)
	if st.Errors != 0 || st.Hairpin == 0 || st.DNAT == 0 || st.RNAT == 0 || st.ICMP < 4 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBackendsPinsAndDelete: three backends all get connections; a second
// Plane (a later CLI process) changes the running lab through the pins; a
// service deleted under a running stream breaks nothing else.
func TestBackendsPinsAndDelete(t *testing.T) {
	tl := upLab(t, "bpb", true)
	p1 := openPlane(t, tl)
	b := tl.pod("pod-b")
	attach(t, tl, p1, "pod-b", dp.InPod)
	p1.Close()

	// A later process: same maps (pinned), programs still attached.
	p := openPlane(t, tl)
	if len(p.Created()) != 0 {
		t.Fatalf("second Open created %v: the pins were not reused", p.Created())
	}
	var backends []dp.Backend
	for _, pod := range []string{"pod-a", "pod-c", "pod-d"} {
		backends = append(backends, dp.Backend{IP: tl.addr(pod), Port: testPort})
	}
	if err := p.AddService(dp.Service{VIP: vip, Port: testPort, Proto: dp.TCP, Backends: backends}); err != nil {
		t.Fatal(err)
	}
	eps, err := p.ListEndpoints()
	if err != nil || len(eps) != 1 || eps[0].NS != b.NS {
		t.Fatalf("endpoints seen by a second process: %+v, %v", eps, err)
	}

	hits := map[string]int{}
	for i := 0; i < 30; i++ {
		ans, err := tcpOnce(b.NS, svcAddr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		hits[ans.pod]++
	}
	t.Logf("30 connections to %s over 3 backends: %v", svcAddr, hits)
	for _, pod := range []string{"pod-a", "pod-c", "pod-d"} {
		if hits[pod] == 0 {
			t.Fatalf("backend %s got no connection: %v", pod, hits)
		}
	}
	flows, err := p.Flows(0)
	if err != nil || len(flows) < 30 {
		t.Fatalf("conntrack: %d flows, %v", len(flows), err)
	}

	// A lab made by a build without the prefilter arrays: the next Open
	// creates them and counts the Services already loaded, so programs
	// attached from now on (using the new arrays) translate at once.
	p.Close()
	for _, m := range []string{"lb_vip16", "lb6_vip16", "lb_bports"} {
		if err := os.Remove(filepath.Join(dp.PinDir(tl.st.Name), m)); err != nil {
			t.Fatal(err)
		}
	}
	p = openPlane(t, tl)
	if len(p.Created()) != 3 {
		t.Fatalf("Open after removing the prefilters created %v, want the three arrays", p.Created())
	}
	ns, ifn := tl.endpoint("pod-b", dp.InPod)
	if err := p.DetachEndpoint(ns, ifn); err != nil {
		t.Fatal(err)
	}
	attach(t, tl, p, "pod-b", dp.InPod)
	if ans, err := tcpOnce(b.NS, svcAddr); err != nil {
		t.Fatalf("service after the prefilters were rebuilt: %+v, %v", ans, err)
	}

	// A stream runs while its service is deleted.
	c, _, err := dialTCP(b.NS, svcAddr)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		written atomic.Int64
		werr    error
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		chunk := make([]byte, 64<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			n, err := c.Write(chunk)
			written.Add(int64(n))
			if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				werr = err
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	before := written.Load()
	if err := p.DelService(vip, testPort, dp.TCP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	c.Close()
	t.Logf("stream: %d bytes before the delete, %d in all (write error: %v)", before, written.Load(), werr)
	if before == 0 {
		t.Fatal("the stream carried nothing before the delete")
	}
	err = nsutil.Do(b.NS, func() error {
		c, err := net.DialTimeout("tcp4", svcAddr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err == nil {
		t.Fatal("a deleted service still answers")
	}
	// Everything else still works: pod IP, and the service once re-added.
	if ans, err := tcpOnce(b.NS, tl.pod("pod-c").IP+":5201"); err != nil || ans.pod != "pod-c" {
		t.Fatalf("pod IP after the delete: %+v, %v", ans, err)
	}
	if err := p.AddService(dp.Service{VIP: vip, Port: testPort, Proto: dp.TCP, Backends: backends[:1]}); err != nil {
		t.Fatal(err)
	}
	if ans, err := tcpOnce(b.NS, svcAddr); err != nil || ans.pod != "pod-a" {
		t.Fatalf("re-added service: %+v, %v", ans, err)
	}
	if st, _ := p.Stats(); st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestChecksumsCompletedInSoftware: packets from a pod's own sockets carry
// CHECKSUM_PARTIAL (the TCP/UDP field holds only the pseudo-header sum, to
// be completed by the device), and lb_rewrite/lb6_rewrite update that field
// themselves (bpf/lb.h, bpf/lb6.h). Between veths nobody ever completes it,
// so a wrong sum would pass unnoticed. With TX checksum offload off on the
// node ends of the veths, the node's stack completes every checksum in
// software after the programs ran (ingress translation, egress reverse
// NAT), and the pods verify them: TCP and UDP, with and without a port
// change, over IPv4 and IPv6 (a dual-stack lab), work only if the sums
// were right.
func TestChecksumsCompletedInSoftware(t *testing.T) {
	tl := upLabFamily(t, "bck", true, family.Dual)
	p := openPlane(t, tl)
	a4, a6 := tl.addr("pod-a"), netip.MustParseAddr(tl.pod("pod-a").IP6)
	for _, proto := range []dp.Proto{dp.TCP, dp.UDP} {
		for _, port := range []uint16{testPort, 5302} {
			for _, s := range []dp.Service{
				{VIP: vip, Port: port, Proto: proto, Backends: []dp.Backend{{IP: a4, Port: testPort}}},
				{VIP: vip6, Port: port, Proto: proto, Backends: []dp.Backend{{IP: a6, Port: testPort}}},
			} {
				if err := p.AddService(s); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, pod := range []string{"pod-a", "pod-b"} {
		attach(t, tl, p, pod, dp.NodeSide)
		if err := modes.SetTxChecksum(tl.st.Nodes[0].NS, tl.hostIf(pod), false); err != nil {
			t.Fatal(err)
		}
	}
	b := tl.pod("pod-b")
	svc6 := netip.AddrPortFrom(vip6, testPort).String()
	for _, target := range []string{svcAddr, vip.String() + ":5302", svc6, netip.AddrPortFrom(vip6, 5302).String()} {
		ans, err := tcpOnce(b.NS, target)
		if err != nil || ans.pod != "pod-a" {
			t.Fatalf("tcp pod-b -> %s with checksums completed in software: %+v, %v", target, ans, err)
		}
		ans, from, err := udpOnce(b.NS, target)
		if err != nil || ans.pod != "pod-a" || from != target {
			t.Fatalf("udp pod-b -> %s with checksums completed in software: %+v from %s, %v", target, ans, from, err)
		}
	}
	// A stream: 64 KB segments are cut and checksummed in software too.
	for _, target := range []string{svcAddr, svc6} {
		c, _, err := dialTCP(b.NS, target)
		if err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 1<<20)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Write(chunk)
		c.Close()
		if err != nil {
			t.Fatalf("1 MB through %s with checksums completed in software: %v", target, err)
		}
	}
	if st, _ := p.Stats(); st.Errors != 0 || st.DNAT == 0 || st.RNAT == 0 {
		t.Fatalf("stats %+v", st)
	}
	if st, _ := p.Stats6(); st.Errors != 0 || st.DNAT == 0 || st.RNAT == 0 {
		t.Fatalf("IPv6 stats %+v", st)
	}
}

package sock

// Integration tests on real labs (names start with "fa"): clients run as
// separate processes (this test binary, re-executed: see client_test.go)
// started straight into the lab's cgroup inside a pod's namespace.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/platform/testnet"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

const (
	port    = 5201
	svcAddr = "10.96.0.100:5201"
)

var vip = netip.MustParseAddr("10.96.0.100")

type sockLab struct {
	l     *lab.Lab
	p     *Plane
	cg    string
	downs func()
}

func (s *sockLab) pod(name string) lab.PodState {
	for _, p := range s.l.State.Pods {
		if p.Name == name {
			return p
		}
	}
	panic("no pod " + name)
}

// upSockLab builds a lab of mode (with echo servers in each pod on port
// 5201, iperf3's, if echo) and gives it socket-level Services (Setup).
func upSockLab(t *testing.T, prefix, mode string, echo bool) *sockLab {
	return upSockLabFamily(t, prefix, mode, family.IPv4, echo)
}

// upSockLabFamily is upSockLab for pods of family fam (echo servers in
// each of the pods' families).
func upSockLabFamily(t *testing.T, prefix, mode string, fam family.Family, echo bool) *sockLab {
	t.Helper()
	name := fmt.Sprintf("%s%d", prefix, os.Getpid()%10000)
	l, down := testnet.UpLab(t, lab.Spec{Name: name, Mode: mode, Family: fam}, 4)
	s := &sockLab{l: l}
	// The plane closes before the lab goes (tests also take it down early).
	s.downs = func() {
		if s.p != nil {
			s.p.Close()
			s.p = nil
		}
		down()
	}
	t.Cleanup(s.downs)
	for _, p := range l.State.Pods {
		if echo && fam.HasIPv4() {
			serve(t, p.NS, p.Name)
		}
		if echo && fam.HasIPv6() {
			testnet.Serve6(t, p.NS, port, p.Name)
		}
	}
	p, a, err := Setup(name, family.Dual, lab.Recorder(name))
	s.p = p
	if err != nil {
		t.Fatal(err)
	}
	cg, _ := cgroup.LabPath(name)
	if a.Cgroup != cg || !a.CgroupCreated {
		t.Fatalf("attachment %+v: want a new cgroup %s", a, cg)
	}
	s.cg = cg
	return s
}

// serve runs the shared TCP/UDP servers answering "<pod> <peer>" in namespace ns.
func serve(t *testing.T, ns, pod string) { testnet.Serve(t, ns, port, pod) }

// client runs this test binary as a client (client_test.go) in a pod's
// namespace; inCgroup starts it inside the lab's cgroup.
func (s *sockLab) client(t *testing.T, pod, how, addr string, inCgroup bool) (clientResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := proc.Command(ctx, s.pod(pod).NS, os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), clientEnv+"="+how, clientAddrEnv+"="+addr)
	if inCgroup {
		if err := c.InCgroup(s.cg); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.Output()
	var r clientResult
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		if err == nil {
			err = fmt.Errorf("client output %q: %v", out, jerr)
		}
		return r, err
	}
	if r.Error != "" {
		return r, errors.New(r.Error)
	}
	if inCgroup && !strings.HasSuffix(r.Cgroup, "/"+cgroup.Sub+"/"+s.l.State.Name) {
		t.Fatalf("the client ran in cgroup %q, not the lab's", r.Cgroup)
	}
	return r, err
}

func (s *sockLab) addService(t *testing.T, proto tcbpf.Proto, backends ...string) {
	t.Helper()
	var bs []tcbpf.Backend
	for _, b := range backends {
		bs = append(bs, tcbpf.Backend{IP: netip.MustParseAddr(s.pod(b).IP), Port: port})
	}
	if err := s.p.AddService(tcbpf.Service{VIP: vip, Port: port, Proto: proto, Backends: bs}); err != nil {
		t.Fatal(err)
	}
}

// TestSocketServices: on macvlan (where node-side rules never see pod
// traffic) and veth-routed, with no tc program anywhere: TCP, connected
// and unconnected UDP through a clusterIP, from processes in the lab's
// cgroup; the backend sees the client's own address (no NAT on the wire);
// recvfrom and getpeername say clusterIP; hairpin; three backends, and
// with sessionAffinity one of them per client; a Service without backends
// refused; processes outside the cgroup untouched.
func TestSocketServices(t *testing.T) {
	for _, mode := range []string{"macvlan", "veth-routed"} {
		t.Run(mode, func(t *testing.T) {
			s := upSockLab(t, "fas", mode, true)
			s.addService(t, tcbpf.TCP, "pod-a")
			s.addService(t, tcbpf.UDP, "pod-a")
			b, a := s.pod("pod-b"), s.pod("pod-a")

			r, err := s.client(t, "pod-b", "tcp", svcAddr, true)
			if err != nil || r.Pod != "pod-a" || !strings.HasPrefix(r.SeenAs, b.IP+":") || r.Peer != svcAddr {
				t.Fatalf("tcp: %+v, %v (want pod-a seeing %s, getpeername %s)", r, err, b.IP, svcAddr)
			}
			r, err = s.client(t, "pod-b", "udp", svcAddr, true)
			if err != nil || r.Pod != "pod-a" || r.From != svcAddr || !strings.HasPrefix(r.SeenAs, b.IP+":") {
				t.Fatalf("unconnected udp: %+v, %v (want pod-a answering from %s)", r, err, svcAddr)
			}
			r, err = s.client(t, "pod-b", "udp-connected", svcAddr, true)
			if err != nil || r.Pod != "pod-a" || r.Peer != svcAddr {
				t.Fatalf("connected udp: %+v, %v", r, err)
			}
			// Hairpin: the socket connects to its own pod directly.
			r, err = s.client(t, "pod-a", "tcp", svcAddr, true)
			if err != nil || r.Pod != "pod-a" || !strings.HasPrefix(r.SeenAs, a.IP+":") || r.Peer != svcAddr {
				t.Fatalf("hairpin tcp: %+v, %v", r, err)
			}
			r, err = s.client(t, "pod-a", "udp", svcAddr, true)
			if err != nil || r.Pod != "pod-a" || r.From != svcAddr {
				t.Fatalf("hairpin udp: %+v, %v", r, err)
			}
			// Pod IPs are untouched.
			if r, err = s.client(t, "pod-b", "tcp", a.IP+":5201", true); err != nil || r.Peer != a.IP+":5201" {
				t.Fatalf("pod IP from the cgroup: %+v, %v", r, err)
			}
			// Outside the lab's cgroup nothing is translated: the clusterIP
			// leads nowhere (it is no address in the lab).
			if r, err := s.client(t, "pod-b", "tcp", svcAddr, false); err == nil {
				t.Fatalf("a process outside the lab's cgroup reached the clusterIP: %+v", r)
			}
			st, _ := s.p.SockStats()
			tc, _ := s.p.Stats()
			t.Logf("socket stats %+v; tc stats %+v", st, tc)
			if st.Connects != 3 || st.Sends < 2 || st.Reverse < 5 {
				t.Fatalf("socket stats %+v", st)
			}
			if tc.DNAT+tc.RNAT != 0 {
				t.Fatalf("packets were translated on the wire: %+v", tc)
			}

			// Three backends all get connections; then no backends: refused.
			if err := s.p.DelService(vip, port, tcbpf.TCP); err != nil {
				t.Fatal(err)
			}
			s.addService(t, tcbpf.TCP, "pod-a", "pod-c", "pod-d")
			three := tcbpf.Service{VIP: vip, Port: port, Proto: tcbpf.TCP}
			for _, p := range []string{"pod-a", "pod-c", "pod-d"} {
				three.Backends = append(three.Backends, tcbpf.Backend{IP: netip.MustParseAddr(s.pod(p).IP), Port: port})
			}
			s.spreadThenAffinity(t, three, "tcp", svcAddr)
			if err := s.p.DelService(vip, port, tcbpf.TCP); err != nil {
				t.Fatal(err)
			}
			s.addService(t, tcbpf.TCP)
			if r, err := s.client(t, "pod-b", "tcp", svcAddr, true); err == nil || !strings.Contains(err.Error(), "connection refused") {
				t.Fatalf("a Service without backends: %+v, %v (want ECONNREFUSED, as kube-proxy's REJECT)", r, err)
			}
		})
	}
}

// TestSocketServices6: on a dual and an IPv6-only veth-routed lab, with no
// tc program anywhere: TCP, connected and unconnected UDP through an IPv6
// clusterIP (connect6, sendmsg6); the backend sees the client's own IPv6
// address; getpeername6 and recvmsg6 say the clusterIP; three backends,
// and with sessionAffinity one of them per client; a Service without
// backends refused; processes outside the cgroup untouched. In the dual
// lab, an IPv6 socket's v4-mapped clusterIP reaches the IPv4 Service and
// getpeername and recvfrom say the v4-mapped clusterIP.
func TestSocketServices6(t *testing.T) {
	vip6 := netip.MustParseAddr("fd00:10:96::100")
	svc6 := netip.AddrPortFrom(vip6, port).String()
	mapped := netip.AddrPortFrom(netip.AddrFrom16(vip.As16()), port).String() // [::ffff:10.96.0.100]:5201
	for _, fam := range []family.Family{family.Dual, family.IPv6} {
		t.Run(string(fam), func(t *testing.T) {
			s := upSockLabFamily(t, "fa6", "veth-routed", fam, true)
			a, b := s.pod("pod-a"), s.pod("pod-b")
			for _, proto := range []tcbpf.Proto{tcbpf.TCP, tcbpf.UDP} {
				be := []tcbpf.Backend{{IP: netip.MustParseAddr(a.IP6), Port: port}}
				if err := s.p.AddService(tcbpf.Service{VIP: vip6, Port: port, Proto: proto, Backends: be}); err != nil {
					t.Fatal(err)
				}
			}
			seen := "[" + b.IP6 + "]:"
			r, err := s.client(t, "pod-b", "tcp6", svc6, true)
			if err != nil || r.Pod != "pod-a" || !strings.HasPrefix(r.SeenAs, seen) || r.Peer != svc6 {
				t.Fatalf("tcp6: %+v, %v (want pod-a seeing %s, getpeername %s)", r, err, seen, svc6)
			}
			r, err = s.client(t, "pod-b", "udp6", svc6, true)
			if err != nil || r.Pod != "pod-a" || r.From != svc6 || !strings.HasPrefix(r.SeenAs, seen) {
				t.Fatalf("unconnected udp6: %+v, %v (want pod-a answering from %s)", r, err, svc6)
			}
			r, err = s.client(t, "pod-b", "udp6-connected", svc6, true)
			if err != nil || r.Pod != "pod-a" || r.Peer != svc6 {
				t.Fatalf("connected udp6: %+v, %v", r, err)
			}
			if r, err := s.client(t, "pod-b", "tcp6", svc6, false); err == nil {
				t.Fatalf("a process outside the lab's cgroup reached the IPv6 clusterIP: %+v", r)
			}
			if fam == family.Dual {
				s.addService(t, tcbpf.TCP, "pod-a")
				s.addService(t, tcbpf.UDP, "pod-a")
				r, err = s.client(t, "pod-b", "tcp6", mapped, true)
				if err != nil || r.Pod != "pod-a" || !strings.HasPrefix(r.SeenAs, b.IP+":") || r.Peer != mapped {
					t.Fatalf("v4-mapped tcp6: %+v, %v (want pod-a seeing %s, getpeername %s)", r, err, b.IP, mapped)
				}
				r, err = s.client(t, "pod-b", "udp6", mapped, true)
				if err != nil || r.Pod != "pod-a" || r.From != mapped {
					t.Fatalf("v4-mapped unconnected udp6: %+v, %v (want pod-a answering from %s)", r, err, mapped)
				}
				r, err = s.client(t, "pod-b", "udp6-connected", mapped, true)
				if err != nil || r.Pod != "pod-a" || r.Peer != mapped {
					t.Fatalf("v4-mapped connected udp6: %+v, %v", r, err)
				}
			}
			st, _ := s.p.SockStats()
			tc, _ := s.p.Stats()
			tc6, _ := s.p.Stats6()
			t.Logf("socket stats %+v; tc stats %+v, IPv6 %+v", st, tc, tc6)
			if st.Reverse < 3 {
				t.Fatalf("socket stats %+v: getpeername and recvfrom were not translated back", st)
			}
			if tc.DNAT+tc.RNAT+tc6.DNAT+tc6.RNAT != 0 {
				t.Fatalf("packets were translated on the wire: %+v, %+v", tc, tc6)
			}
			three := tcbpf.Service{VIP: vip6, Port: port, Proto: tcbpf.TCP}
			for _, p := range []string{"pod-a", "pod-c", "pod-d"} {
				three.Backends = append(three.Backends, tcbpf.Backend{IP: netip.MustParseAddr(s.pod(p).IP6), Port: port})
			}
			if err := s.p.UpdateService(three); err != nil {
				t.Fatal(err)
			}
			s.spreadThenAffinity(t, three, "tcp6", svc6)
			// No backends: connect() and sendto() refused, as kube-proxy's REJECT.
			for _, proto := range []tcbpf.Proto{tcbpf.TCP, tcbpf.UDP} {
				if err := s.p.DelService(vip6, port, proto); err != nil {
					t.Fatal(err)
				}
				if err := s.p.AddService(tcbpf.Service{VIP: vip6, Port: port, Proto: proto}); err != nil {
					t.Fatal(err)
				}
			}
			for _, how := range []string{"tcp6", "udp6"} {
				if r, err := s.client(t, "pod-b", how, svc6, true); err == nil || !strings.Contains(err.Error(), "connection refused") {
					t.Fatalf("%s to an IPv6 Service without backends: %+v, %v (want ECONNREFUSED)", how, r, err)
				}
			}
			if st2, _ := s.p.SockStats(); st2.NoBackend < 2 {
				t.Fatalf("socket stats %+v: the refusals were not the socket programs'", st2)
			}
		})
	}
}

// spreadThenAffinity: svc (in place, three backends, no affinity yet)
// spreads 24 of pod-b's connections (client how) to addr over all its
// backends; with sessionAffinity ClientIP, 12 more go to one of them: a
// client is its network namespace (the socket has no source address yet at
// connect()).
func (s *sockLab) spreadThenAffinity(t *testing.T, svc tcbpf.Service, how, addr string) {
	t.Helper()
	answers := func(n int) map[string]int {
		hits := map[string]int{}
		for i := 0; i < n; i++ {
			r, err := s.client(t, "pod-b", how, addr, true)
			if err != nil {
				t.Fatalf("%s connection %d to %s: %v", how, i, addr, err)
			}
			hits[r.Pod]++
		}
		return hits
	}
	hits := answers(24)
	t.Logf("%s: 24 connections over %d backends: %v", how, len(svc.Backends), hits)
	if len(hits) != len(svc.Backends) {
		t.Fatalf("%s: 24 connections went to %v, want every one of %d backends", how, hits, len(svc.Backends))
	}
	svc.Affinity = 60
	if err := s.p.UpdateService(svc); err != nil {
		t.Fatal(err)
	}
	if kept := answers(12); len(kept) != 1 {
		t.Fatalf("%s sessionAffinity: 12 connections of pod-b went to %v, want one backend", how, kept)
	}
}

// TestSocketServicesLeaveNothing: detach works, and down removes the
// cgroup, the pins, the links and the programs (the eight hooks').
func TestSocketServicesLeaveNothing(t *testing.T) {
	s := upSockLab(t, "fax", "macvlan", true)
	name := s.l.State.Name
	var links []link.ID
	progs := map[ebpf.ProgramID]bool{}
	for _, h := range s.p.hooks() { // both families'
		l, err := link.LoadPinnedLink(tcbpf.PinDir(name)+"/sock/"+h.name, nil)
		if err != nil {
			t.Fatal(err)
		}
		info, err := l.Info()
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, info.ID)
		progs[info.Program] = true
	}
	if _, err := s.p.Attach(); err == nil {
		t.Fatal("a second Attach succeeded")
	}
	// Detach, and the clusterIP is no longer translated; attach again.
	s.addService(t, tcbpf.TCP, "pod-a")
	if err := s.p.Detach(); err != nil {
		t.Fatal(err)
	}
	if s.p.Attached() {
		t.Fatal("still attached after Detach")
	}
	if _, err := s.client(t, "pod-b", "tcp", svcAddr, true); err == nil {
		t.Fatal("translated after Detach")
	}
	if _, err := s.p.Attach(); err != nil {
		t.Fatal(err)
	}
	if r, err := s.client(t, "pod-b", "tcp", svcAddr, true); err != nil || r.Pod != "pod-a" {
		t.Fatalf("after attaching again: %+v, %v", r, err)
	}
	// A process left running in the cgroup: down stops it.
	c := proc.Command(context.Background(), s.pod("pod-b").NS, "sleep", "60")
	if err := c.InCgroup(s.cg); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go c.Wait()
	s.downs()
	if _, err := os.Stat(s.cg); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cgroup %s left after down", s.cg)
	}
	if _, err := os.Stat(tcbpf.PinDir(name)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pins left in %s", tcbpf.PinDir(name))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		for _, id := range links {
			if l, err := link.NewFromID(id); err == nil {
				l.Close()
				left = append(left, fmt.Sprintf("link %d", id))
			}
		}
		for id := range progs {
			if p, err := ebpf.NewProgramFromID(id); err == nil {
				p.Close()
				left = append(left, fmt.Sprintf("program %d", id))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still in the kernel after down: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestIperf3ThroughSocketService: the engines' client starts in the lab's
// cgroup (engine.Target.ClientCgroup) and reaches a clusterIP on macvlan,
// where nothing but the socket programs could translate it.
func TestIperf3ThroughSocketService(t *testing.T) {
	s := upSockLab(t, "fai", "macvlan", false)
	a := s.pod("pod-a")
	be := tcbpf.Backend{IP: netip.MustParseAddr(a.IP), Port: engine.Iperf3Port}
	if err := s.p.AddService(tcbpf.Service{VIP: vip, Port: engine.Iperf3Port, Proto: tcbpf.TCP, Backends: []tcbpf.Backend{be}}); err != nil {
		t.Fatal(err)
	}
	d, err := engine.Get("iperf3")
	if err != nil {
		t.Fatal(err)
	}
	tg := engine.Target{ServerNS: a.NS, ClientNS: s.pod("pod-b").NS, Addr: vip.String(), ClientCgroup: s.cg}
	res, err := d.Run(context.Background(), tg, engine.Spec{Test: engine.TCPStream, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := s.p.SockStats()
	t.Logf("iperf3 via %s: %.2f Gbit/s; socket stats %+v", vip, res.Value, st)
	if res.Value <= 0 || st.Connects < 2 {
		t.Fatalf("result %+v, socket stats %+v: want iperf3's control and data connections translated", res, st)
	}
}

// TestNetnsOnly: programs loaded for one network namespace (a Kubernetes
// node's own, with vnetlab-ebpf) translate the sockets of that namespace
// and leave alone those of another namespace in the same cgroup (the pods,
// which the tc programs serve).
func TestNetnsOnly(t *testing.T) {
	s := upNetnsLab(t, "fan")
	name := s.l.State.Name
	cookie, mine := s.netnsCookie(t, "pod-b"), s.netnsCookie(t, "pod-c")
	if mine == cookie {
		t.Fatalf("netns cookies: pod-b %d, pod-c %d: want two different", cookie, mine)
	}
	p, a, err := setup(name, family.Dual, lab.Recorder(name), cookie, false)
	s.p = p
	if err != nil {
		t.Fatal(err)
	}
	s.cg = a.Cgroup
	s.addService(t, tcbpf.TCP, "pod-a")
	if r, err := s.client(t, "pod-b", "tcp", svcAddr, true); err != nil || r.Pod != "pod-a" {
		t.Fatalf("pod-b (the namespace the programs serve): %+v, %v, want pod-a", r, err)
	}
	if r, err := s.client(t, "pod-c", "tcp", svcAddr, true); err == nil {
		t.Fatalf("pod-c (another namespace, same cgroup) was translated: %+v", r)
	}
	if st, _ := p.SockStats(); st.Connects != 1 {
		t.Fatalf("socket stats %+v: want exactly pod-b's connect translated", st)
	}
	if _, err := OpenNetnsOnly(name, 0); err == nil {
		t.Fatal("OpenNetnsOnly accepted cookie 0")
	}
	root, err := cgroup.Root()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Open(name + "x")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { q.Close(); _ = os.RemoveAll(q.Dir()) }()
	for _, bad := range []string{root, "/tmp", root + "/.."} {
		if _, err := q.AttachCgroup(bad); err == nil {
			_ = q.Detach()
			t.Fatalf("AttachCgroup(%s) accepted", bad)
		}
	}
}

// revEntries counts sock_rev's entries (pairs the sockets' own storage had
// no room for).
func (s *sockLab) revEntries(t *testing.T) int {
	t.Helper()
	var (
		k  sockSockRevKey
		v  sockSockRevVal
		n  int
		it = s.p.objs.SockRev.Iterate()
	)
	for it.Next(&k, &v) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSocketReverseState: the way back without an LRU insert. Connected
// sockets (sock_conns, by cookie) leave nothing in sock_rev; one
// unconnected UDP socket talking to six Services (six backends: more than
// its socket storage, sock_dests, holds) hears each answer from the right
// clusterIP, the two beyond the storage's four through sock_rev; a UDP
// socket connected to one Service and then another reports (and talks to)
// the second.
func TestSocketReverseState(t *testing.T) {
	s := upSockLab(t, "fap", "veth-routed", true)
	const services = 6
	var addrs, want []string
	for i := 0; i < services; i++ {
		pod := []string{"pod-a", "pod-c"}[i%2]
		bport := port + 1 + i
		testnet.Serve(t, s.pod(pod).NS, bport, pod)
		v := netip.AddrFrom4([4]byte{10, 96, 1, byte(i + 1)})
		be := tcbpf.Backend{IP: netip.MustParseAddr(s.pod(pod).IP), Port: uint16(bport)}
		if err := s.p.AddService(tcbpf.Service{VIP: v, Port: 80, Proto: tcbpf.UDP, Backends: []tcbpf.Backend{be}}); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, v.String()+":80")
		want = append(want, pod+"@"+v.String()+":80")
	}
	s.addService(t, tcbpf.TCP, "pod-a")

	if r, err := s.client(t, "pod-b", "tcp", svcAddr, true); err != nil || r.Peer != svcAddr {
		t.Fatalf("tcp: %+v, %v", r, err)
	}
	if r, err := s.client(t, "pod-b", "udp-connected", addrs[0], true); err != nil || r.Peer != addrs[0] {
		t.Fatalf("connected udp: %+v, %v", r, err)
	}
	if n := s.revEntries(t); n != 0 {
		t.Fatalf("sock_rev holds %d entries after connected sockets only: want 0 (sock_conns has them)", n)
	}

	r, err := s.client(t, "pod-b", "udp-many", strings.Join(addrs, ","), true)
	if err != nil || strings.Join(r.Answers, " ") != strings.Join(want, " ") {
		t.Fatalf("one unconnected socket, %d Services: %+v, %v; want answers %v", services, r, err, want)
	}
	if n := s.revEntries(t); n != services-4 {
		t.Fatalf("sock_rev holds %d entries: want %d (what four storage slots cannot hold)", n, services-4)
	}

	r, err = s.client(t, "pod-b", "udp-reconnect", addrs[0]+","+addrs[1], true)
	if err != nil || r.Peer != addrs[1] || r.Pod != "pod-c" {
		t.Fatalf("udp reconnected from %s to %s: %+v, %v (want peer %s, answered by pod-c)", addrs[0], addrs[1], r, err, addrs[1])
	}
	st, _ := s.p.SockStats()
	t.Logf("socket stats %+v", st)
}

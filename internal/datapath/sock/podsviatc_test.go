package sock

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// TestPodsViaTC: programs loaded with OpenPodsViaTC (kube-proxy
// --socket-lb) on a lab whose pods also carry the tc programs: a pod's
// connection to a Service with endpoints is translated at connect() (the
// socket counter rises, tc translates nothing); a Service without
// endpoints is the tc programs' (ECONNREFUSED from their ICMP port
// unreachable), and so are a Service with sessionAffinity and a connected
// UDP socket; the namespace the programs were loaded for (a node's own,
// here pod-c's) keeps the socket programs' behaviour (connect() refused
// by them, also ECONNREFUSED).
func TestPodsViaTC(t *testing.T) {
	s := upNetnsLab(t, "fat")
	p, a, err := setup(s.l.State.Name, family.Dual, lab.Recorder(s.l.State.Name), s.netnsCookie(t, "pod-c"), true)
	s.p = p
	if err != nil {
		t.Fatal(err)
	}
	s.cg = a.Cgroup
	for _, pod := range []string{"pod-a", "pod-b", "pod-c"} {
		if _, err := p.AttachEndpoint(s.pod(pod).NS, "eth0", tcbpf.InPod); err != nil {
			t.Fatal(err)
		}
	}
	counters := func() (Stats, tcbpf.Stats) {
		t.Helper()
		ss, err := p.SockStats()
		if err != nil {
			t.Fatal(err)
		}
		ts, err := p.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return ss, ts
	}

	s.addService(t, tcbpf.TCP, "pod-a")
	if r, err := s.client(t, "pod-b", "tcp", svcAddr, true); err != nil || r.Pod != "pod-a" {
		t.Fatalf("pod-b to the Service: %+v, %v, want pod-a", r, err)
	}
	ss, ts := counters()
	if ss.Connects != 1 || ts.DNAT != 0 {
		t.Fatalf("socket stats %+v, tc stats %+v: want the connect translated at the socket, no packet by tc", ss, ts)
	}

	// Connected UDP: tc's (a socket connected to a backend could never
	// move when the backend goes; tc's conntrack entry can be forgotten).
	// Unconnected UDP: the socket's (each datagram picks again).
	s.addService(t, tcbpf.UDP, "pod-a")
	if r, err := s.client(t, "pod-b", "udp-connected", svcAddr, true); err != nil || r.Pod != "pod-a" {
		t.Fatalf("pod-b to the UDP Service, connected: %+v, %v, want pod-a", r, err)
	}
	if ss2, ts2 := counters(); ss2.Connects != ss.Connects || ts2.DNAT == 0 {
		t.Fatalf("socket stats %+v, tc stats %+v: want the connected UDP socket's datagram translated by tc, not its connect", ss2, ts2)
	}
	if r, err := s.client(t, "pod-b", "udp", svcAddr, true); err != nil || r.Pod != "pod-a" {
		t.Fatalf("pod-b to the UDP Service, unconnected: %+v, %v, want pod-a", r, err)
	}
	ss, ts = counters()
	if ss.Sends == 0 {
		t.Fatalf("socket stats %+v: want the unconnected datagram translated at the socket", ss)
	}

	// No endpoints: tc refuses (ICMP port unreachable -> ECONNREFUSED).
	if err := p.UpdateService(tcbpf.Service{VIP: vip, Port: port, Proto: tcbpf.TCP}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.client(t, "pod-b", "tcp", svcAddr, true); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("pod-b to a Service without endpoints: %+v, %v: want connection refused (tc's reject)", r, err)
	}
	// The node's own namespace: the socket programs refuse.
	if r, err := s.client(t, "pod-c", "tcp", svcAddr, true); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("pod-c (the programs' own namespace) to a Service without endpoints: %+v, %v: want ECONNREFUSED", r, err)
	}
	ss, ts = counters()
	if ss.NoBackend != 1 || ts.Rejects < 1 {
		t.Fatalf("socket stats %+v, tc stats %+v: want one refusal by the socket programs (pod-c) and tc's reject (pod-b)", ss, ts)
	}

	// sessionAffinity: tc's.
	be := tcbpf.Backend{IP: netip.MustParseAddr(s.pod("pod-a").IP), Port: port}
	if err := p.UpdateService(tcbpf.Service{VIP: vip, Port: port, Proto: tcbpf.TCP, Backends: []tcbpf.Backend{be}, Affinity: 60}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.client(t, "pod-b", "tcp", svcAddr, true); err != nil || r.Pod != "pod-a" {
		t.Fatalf("pod-b to a Service with sessionAffinity: %+v, %v, want pod-a", r, err)
	}
	ss2, ts2 := counters()
	if ss2.Connects != ss.Connects || ts2.DNAT <= ts.DNAT {
		t.Fatalf("socket stats %+v, tc stats %+v (before: %+v, %+v): want the affinity Service's packets translated by tc, not the connect", ss2, ts2, ss, ts)
	}
}

// upNetnsLab builds a veth-routed lab of three pods, pod-a serving, for
// programs loaded for one network namespace (setup with a cookie); the
// plane in s.p closes before the lab goes.
func upNetnsLab(t *testing.T, prefix string) *sockLab {
	t.Helper()
	name := fmt.Sprintf("%s%d", prefix, os.Getpid()%10000)
	l, down := testnet.UpLab(t, lab.Spec{Name: name, Mode: "veth-routed"}, 3)
	s := &sockLab{l: l}
	t.Cleanup(func() {
		if s.p != nil {
			s.p.Close()
		}
		down()
	})
	serve(t, s.pod("pod-a").NS, "pod-a")
	return s
}

// netnsCookie is the cookie of pod's network namespace (never 0).
func (s *sockLab) netnsCookie(t *testing.T, pod string) uint64 {
	t.Helper()
	var c uint64
	if err := nsutil.Do(s.pod(pod).NS, func() (err error) { c, err = NetnsCookie(); return }); err != nil || c == 0 {
		t.Fatalf("netns cookie of %s: %d, %v", pod, c, err)
	}
	return c
}

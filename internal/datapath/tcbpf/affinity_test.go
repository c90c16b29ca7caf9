package tcbpf_test

import (
	"net/netip"
	"testing"
	"time"

	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// sessionAffinity ClientIP: one client's new flows (SYNs from different
// source ports) all reach one backend while the affinity lasts; without
// it they spread; after the timeout the next flow is placed by its hash
// again; a backend that left the Service is not kept. IPv4 (bpf/lb.h) and
// IPv6 (bpf/lb6.h).
func TestSessionAffinity(t *testing.T) {
	for _, f := range affinityFamilies {
		t.Run(f.name, func(t *testing.T) { sessionAffinity(t, f) })
	}
}

// affinityFamily: a Service address, its backends and its clients.
type affinityFamily struct {
	name    string
	vip     netip.Addr
	backend func(i int) netip.Addr
	client  func(i int) netip.Addr
}

var affinityFamilies = []affinityFamily{
	{name: "ipv4", vip: vip,
		backend: func(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 168, 10, byte(20 + i)}) },
		client:  func(i int) netip.Addr { return netip.AddrFrom4([4]byte{192, 168, 11, byte(i)}) }},
	{name: "ipv6", vip: vip6,
		backend: func(i int) netip.Addr { return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 15: byte(0x20 + i)}) },
		// i in byte 14: in byte 15 it would cancel the source port's
		// low byte in the hash's word while both count up together.
		client: func(i int) netip.Addr { return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x11, 14: byte(i), 15: 1}) }},
}

// threeBackends: backends 0, 1, 2 on port 80.
func (f affinityFamily) threeBackends() []dp.Backend {
	return []dp.Backend{{IP: f.backend(0), Port: 80}, {IP: f.backend(1), Port: 80}, {IP: f.backend(2), Port: 80}}
}

func sessionAffinity(t *testing.T, f affinityFamily) {
	p := testPlane(t)
	backends := f.threeBackends()
	podB := f.client(200)
	s := dp.Service{VIP: f.vip, Port: 5201, Proto: dp.TCP, Backends: backends}
	if err := p.AddService(s); err != nil {
		t.Fatal(err)
	}
	sport := uint16(30000)
	// connect sends one SYN from a new source port; returns its backend.
	connect := func(client netip.Addr) netip.Addr {
		sport++
		return synBackend(t, p, client, f.vip, sport)
	}
	spread := func(n int) map[netip.Addr]int {
		seen := map[netip.Addr]int{}
		for range n {
			seen[connect(podB)]++
		}
		return seen
	}
	if got := spread(20); len(got) < 2 {
		t.Fatalf("without affinity 20 flows all went to one backend: %v", got)
	}

	s.Affinity = 1
	if err := p.UpdateService(s); err != nil {
		t.Fatal(err)
	}
	if ss, _ := p.ListServices(); ss[0].Affinity != 1 {
		t.Fatalf("ListServices: affinity %d, want 1", ss[0].Affinity)
	}
	got := spread(20)
	if len(got) != 1 {
		t.Fatalf("with affinity 20 flows from one client: %v, want one backend", got)
	}
	var kept netip.Addr
	for b := range got {
		kept = b
	}
	// Another client has its own.
	other := f.client(201)
	first := connect(other)
	for range 5 {
		if b := connect(other); b != first {
			t.Fatalf("second client moved from %s to %s", first, b)
		}
	}
	// After the timeout (1 s since the last new flow) the next flow is
	// placed by its hash: some flow lands elsewhere (the hash of fixed
	// tuples: deterministic, not a matter of luck).
	moved := false
	for try := 0; try < 10 && !moved; try++ {
		time.Sleep(1100 * time.Millisecond)
		b := connect(podB)
		moved = b != kept
		kept = b
	}
	if !moved {
		t.Fatal("after the affinity timeout, 10 new flows stayed on the remembered backend")
	}
	// The remembered backend leaves: the client gets another, and keeps it.
	var rest []dp.Backend
	for _, b := range backends {
		if b.IP != kept {
			rest = append(rest, b)
		}
	}
	s.Backends = rest
	if err := p.UpdateService(s); err != nil {
		t.Fatal(err)
	}
	now := connect(podB)
	if now == kept {
		t.Fatalf("a flow still went to %s, which left the Service", kept)
	}
	if got := spread(10); len(got) != 1 || got[now] != 10 {
		t.Fatalf("after the move: %v, want all on %s", got, now)
	}
	// Affinity off again: flows spread.
	s.Affinity = 0
	if err := p.UpdateService(s); err != nil {
		t.Fatal(err)
	}
	if got := spread(20); len(got) < 2 {
		t.Fatalf("affinity off: 20 flows all on one backend: %v", got)
	}
	if err := p.AddService(dp.Service{VIP: f.vip, Port: 1, Proto: dp.TCP, Affinity: dp.MaxAffinity + 1}); err == nil {
		t.Fatal("an affinity timeout over a day was accepted")
	}
}

// A backend that stays keeps its clients when the others change, also when
// it has to move to another slot (the Service shrank below its slot): the
// program finds it where UpdateService put it. Both families.
func TestSessionAffinityAcrossEndpointChanges(t *testing.T) {
	for _, f := range affinityFamilies {
		t.Run(f.name, func(t *testing.T) { sessionAffinityAcrossEndpointChanges(t, f) })
	}
}

func sessionAffinityAcrossEndpointChanges(t *testing.T, f affinityFamily) {
	p := testPlane(t)
	three := f.threeBackends()
	a, b, c := three[0], three[1], three[2]
	s := dp.Service{VIP: f.vip, Port: 5201, Proto: dp.TCP, Backends: []dp.Backend{a, b, c}, Affinity: 60}
	if err := p.AddService(s); err != nil {
		t.Fatal(err)
	}
	sport := uint16(40000)
	connect := func(client netip.Addr) netip.Addr {
		sport++
		return synBackend(t, p, client, f.vip, sport)
	}
	// A client that got c, the backend in the last slot.
	var client netip.Addr
	for i := 1; i < 200 && !client.IsValid(); i++ {
		ip := f.client(i)
		if connect(ip) == c.IP {
			client = ip
		}
	}
	if !client.IsValid() {
		t.Fatal("no client of 199 got the third backend")
	}
	// a leaves: c moves from slot 2 into slot 0; b stays in slot 1.
	s.Backends = []dp.Backend{b, c}
	if err := p.UpdateService(s); err != nil {
		t.Fatal(err)
	}
	if ss, _ := p.ListServices(); len(ss[0].Backends) != 2 || ss[0].Backends[0] != c || ss[0].Backends[1] != b {
		t.Fatalf("slots after a left: %v, want [%s %s]", ss[0].Backends, c, b)
	}
	for range 10 {
		if got := connect(client); got != c.IP {
			t.Fatalf("after another backend left, a new flow of the client went to %s, not its %s", got, c.IP)
		}
	}
	// A new backend joins: nobody moves.
	s.Backends = []dp.Backend{a, b, c}
	if err := p.UpdateService(s); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if got := connect(client); got != c.IP {
			t.Fatalf("after a backend joined, a new flow of the client went to %s, not its %s", got, c.IP)
		}
	}
}

// synBackend sends one SYN from client:sport to the Service at to:5201
// (IPv4 or IPv6) through from_pod and returns the backend it was sent to.
func synBackend(t *testing.T, p *dp.Plane, client, to netip.Addr, sport uint16) netip.Addr {
	t.Helper()
	if to.Is6() {
		ret, out := run(t, p.Objects().FromPod, ipv6{src: client, dst: to, proto: protoTCP, sport: sport, dport: 5201, tcpFlags: tcpSYN}.bytes())
		mustOK(t, ret)
		mustValid6(t, out)
		d, err := decode6(out)
		if err != nil {
			t.Fatal(err)
		}
		return d.dst
	}
	ret, out := run(t, p.Objects().FromPod, ipv4{src: client, dst: to, proto: protoTCP, sport: sport, dport: 5201, tcpFlags: tcpSYN}.bytes())
	mustOK(t, ret)
	mustValid(t, out)
	d, _ := decode(out)
	return d.dst
}

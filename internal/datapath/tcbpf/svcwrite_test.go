package tcbpf_test

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// UpdateService keeps the Service's id (its flows keep their backends),
// rewrites the backends growing and shrinking, and keeps the backend-port
// prefilter counting the backends present (at least 1 where a TCP one
// left).
func TestUpdateServiceInPlace(t *testing.T) {
	p := testPlane(t)
	be := func(ip string, port uint16) dp.Backend { return dp.Backend{IP: netip.MustParseAddr(ip), Port: port} }
	vip := netip.MustParseAddr("10.96.0.7")
	s := dp.Service{VIP: vip, Port: 80, Proto: dp.TCP, Backends: []dp.Backend{be("10.244.1.5", 8080)}}
	if err := p.AddService(s); err != nil {
		t.Fatal(err)
	}
	id := func() uint32 {
		ss, err := p.ListServices()
		if err != nil || len(ss) != 1 {
			t.Fatalf("services %v, %v", ss, err)
		}
		return ss[0].ID
	}
	first := id()
	port := func(n uint32) uint32 {
		var v uint32
		if err := p.Objects().LbBports.Lookup(n, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// A backend port a TCP Service's backends leave is marked KeptTCP for
	// good (connections established to it keep it), and its count is that
	// of the backends listening there now: 8080 holds the mark and 0 once
	// its last backend left, and counts one when one comes back.
	const kept = dp.KeptTCP
	for _, step := range []struct {
		bs           []dp.Backend
		n8080, n9090 uint32
	}{
		{[]dp.Backend{be("10.244.1.5", 8080), be("10.244.2.5", 8080), be("10.244.2.6", 9090)}, kept | 2, 1},
		{[]dp.Backend{be("10.244.2.6", 9090)}, kept, kept | 1},
		{nil, kept, kept},
		{[]dp.Backend{be("10.244.1.9", 8080)}, kept | 1, kept},
	} {
		bs := step.bs
		s.Backends = bs
		if err := p.UpdateService(s); err != nil {
			t.Fatal(err)
		}
		ss, _ := p.ListServices()
		if got := ss[0].Backends; !reflect.DeepEqual(got, bs) && !(len(got) == 0 && len(bs) == 0) {
			t.Fatalf("backends %v, want %v", got, bs)
		}
		if id() != first {
			t.Fatalf("id changed from %d to %d", first, id())
		}
		if port(8080) != step.n8080 || port(9090) != step.n9090 {
			t.Errorf("backends %v: prefilter 8080=%#x 9090=%#x, want %#x %#x", bs, port(8080), port(9090), step.n8080, step.n9090)
		}
	}
	missing := dp.Service{VIP: vip, Port: 81, Proto: dp.TCP}
	if err := p.UpdateService(missing); !errors.Is(err, dp.ErrNotFound) {
		t.Errorf("update of a missing Service: %v, want ErrNotFound", err)
	}
}

// ctCount counts the conntrack's forward and reverse entries.
func ctCount(t *testing.T, p *dp.Plane) (fwd, rev int) {
	t.Helper()
	var k dp.CtKey
	var v dp.Ct
	it := p.Objects().LbConntrack.Iterate()
	for it.Next(&k, &v) {
		switch k.Dir {
		case 1:
			fwd++
		case 2:
			rev++
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return fwd, rev
}

// UpdateService rewrites a Service's slots under live TCP flows (another
// order, one backend more): no flow moves to another backend, new flows
// spread over all the new backends, and a second update keeps those too.
// The client's ICMP error about a reply still reaches the flow's backend.
func TestUpdateServiceKeepsLiveFlows(t *testing.T) {
	p := testPlane(t)
	bs := []dp.Backend{{IP: podA, Port: 5201}, {IP: ipOf("192.168.10.12"), Port: 5201}, {IP: ipOf("192.168.10.13"), Port: 5201}}
	s := dp.Service{VIP: vip, Port: 5201, Proto: dp.TCP, Backends: bs}
	if err := p.AddService(s); err != nil {
		t.Fatal(err)
	}
	const flows = 90
	first := map[uint16]netip.Addr{}
	for i := 0; i < flows; i++ {
		sport := uint16(31000 + i)
		_, out := run(t, p.Objects().FromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: sport, dport: 5201, tcpFlags: tcpSYN}.bytes())
		d, _ := decode(out)
		first[sport] = d.dst
		_, out = run(t, p.Objects().FromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: sport, dport: 5201, tcpFlags: tcpACK, payload: []byte("x")}.bytes())
		expect(t, out, podB, sport, d.dst, 5201)
		mustValid(t, out)
	}
	if fwd, rev := ctCount(t, p); fwd != flows || rev != flows {
		t.Fatalf("%d forward and %d reverse entries, want %d each", fwd, rev, flows)
	}

	// The client's ICMP error about a reply: the quote vip:5201 -> client
	// becomes backend:5201 -> client, sent to the backend.
	sport := uint16(31000)
	quoted := ipv4{src: vip, dst: podB, proto: protoTCP, sport: 5201, dport: sport, tcpFlags: tcpACK}
	ret, out := run(t, p.Objects().FromPod, icmpError(3, 3, podB, vip, quoted).bytes())
	mustOK(t, ret)
	if d, _ := decode(out); d.dst != first[sport] {
		t.Fatalf("ICMP error sent to %s, want the flow's backend %s", d.dst, first[sport])
	}
	if qs, qsp, qd, qdp := checkICMP(t, out); qs != first[sport] || qsp != 5201 || qd != podB || qdp != sport {
		t.Fatalf("quote %s:%d -> %s:%d, want %s:5201 -> %s:%d", qs, qsp, qd, qdp, first[sport], podB, sport)
	}

	s.Backends = []dp.Backend{bs[2], bs[0], {IP: ipOf("192.168.10.14"), Port: 5201}, bs[1]}
	if err := p.UpdateService(s); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for sp, be := range first {
		_, out := run(t, p.Objects().FromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: sp, dport: 5201, tcpFlags: tcpACK}.bytes())
		if d, _ := decode(out); d.dst != be {
			moved++
		}
	}
	if moved != 0 {
		t.Fatalf("%d of %d live flows moved to another backend by the update", moved, flows)
	}
	hits := map[netip.Addr]int{}
	after := map[uint16]netip.Addr{}
	for i := 0; i < 200; i++ {
		sp := uint16(33000 + i)
		_, out := run(t, p.Objects().FromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: sp, dport: 5201, tcpFlags: tcpSYN}.bytes())
		d, _ := decode(out)
		hits[d.dst]++
		after[sp] = d.dst
	}
	if len(hits) != 4 {
		t.Fatalf("new flows after the update went to %v, want all four backends", hits)
	}
	s.Backends = []dp.Backend{bs[1], bs[0], bs[2], {IP: ipOf("192.168.10.14"), Port: 5201}}
	if err := p.UpdateService(s); err != nil {
		t.Fatal(err)
	}
	for sp, be := range after {
		_, out := run(t, p.Objects().FromPod, ipv4{src: podB, dst: vip, proto: protoTCP, sport: sp, dport: 5201, tcpFlags: tcpACK}.bytes())
		if d, _ := decode(out); d.dst != be {
			t.Fatalf("flow %d moved from %s to %s by the second update", sp, be, d.dst)
		}
	}
}

// StableSlots keeps every remaining backend in its slot when the count
// allows, so a sessionAffinity client's remembered slot still holds its
// backend after an endpoint change.
func TestStableSlots(t *testing.T) {
	b := func(last byte) dp.Backend {
		return dp.Backend{IP: netip.AddrFrom4([4]byte{10, 244, 1, last}), Port: 80}
	}
	for _, c := range []struct {
		name            string
		old, want, slot []dp.Backend
	}{
		{"new Service", nil, []dp.Backend{b(1), b(2)}, []dp.Backend{b(1), b(2)}},
		{"one added: the others stay", []dp.Backend{b(3), b(1)}, []dp.Backend{b(1), b(2), b(3)}, []dp.Backend{b(3), b(1), b(2)}},
		{"middle one removed: the last moves into its slot", []dp.Backend{b(1), b(2), b(3)}, []dp.Backend{b(1), b(3)}, []dp.Backend{b(1), b(3)}},
		{"first removed, one added", []dp.Backend{b(1), b(2), b(3)}, []dp.Backend{b(2), b(3), b(4)}, []dp.Backend{b(4), b(2), b(3)}},
		{"all replaced", []dp.Backend{b(1), b(2)}, []dp.Backend{b(7), b(8)}, []dp.Backend{b(7), b(8)}},
		{"emptied", []dp.Backend{b(1)}, nil, []dp.Backend{}},
		{"listed twice: as given", []dp.Backend{b(2), b(1)}, []dp.Backend{b(1), b(1), b(2)}, []dp.Backend{b(1), b(1), b(2)}},
	} {
		if got := dp.StableSlots(c.old, c.want); !reflect.DeepEqual(got, c.slot) {
			t.Errorf("%s: %v, want %v", c.name, got, c.slot)
		}
	}
}

// Draining backends sit after the backends for new flows and read back
// marked; lb_slots, where the programs find a backend that moved, names
// every backend's slot and nothing more, through updates that move
// backends, and is empty once the Service is deleted.
func TestDrainingAndSlots(t *testing.T) {
	p := testPlane(t)
	be := func(ip string, draining bool) dp.Backend {
		return dp.Backend{IP: netip.MustParseAddr(ip), Port: 53, Draining: draining}
	}
	slots := func() map[dp.Backend]uint32 {
		out := map[dp.Backend]uint32{}
		var k dp.SlotKey
		var at uint32
		it := p.Objects().LbSlots.Iterate()
		for it.Next(&k, &at) {
			out[dp.BackendOfSlotKey(k)] = at
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	s := dp.Service{VIP: netip.MustParseAddr("10.96.0.53"), Port: 53, Proto: dp.UDP,
		Backends: []dp.Backend{be("10.244.1.1", false), be("10.244.1.2", false), be("10.244.1.3", false)}}
	if err := p.AddService(s); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		bs    []dp.Backend
		want  []dp.Backend // in slot order
		slots map[string]uint32
	}{
		// 10.244.1.1 drains: 10.244.1.3 moves into its slot, it follows.
		{[]dp.Backend{be("10.244.1.1", true), be("10.244.1.2", false), be("10.244.1.3", false)},
			[]dp.Backend{be("10.244.1.3", false), be("10.244.1.2", false), be("10.244.1.1", true)},
			map[string]uint32{"10.244.1.3": 0, "10.244.1.2": 1, "10.244.1.1": 2}},
		// It is gone, 10.244.1.2 drains.
		{[]dp.Backend{be("10.244.1.2", true), be("10.244.1.3", false)},
			[]dp.Backend{be("10.244.1.3", false), be("10.244.1.2", true)},
			map[string]uint32{"10.244.1.3": 0, "10.244.1.2": 1}},
		// Both take new flows again, one more comes.
		{[]dp.Backend{be("10.244.1.2", false), be("10.244.1.3", false), be("10.244.1.4", false)},
			[]dp.Backend{be("10.244.1.3", false), be("10.244.1.2", false), be("10.244.1.4", false)},
			map[string]uint32{"10.244.1.3": 0, "10.244.1.2": 1, "10.244.1.4": 2}},
	} {
		s.Backends = step.bs
		if err := p.UpdateService(s); err != nil {
			t.Fatal(err)
		}
		ss, err := p.ListServices()
		if err != nil || len(ss) != 1 {
			t.Fatalf("services %v, %v", ss, err)
		}
		if !reflect.DeepEqual(ss[0].Backends, step.want) {
			t.Fatalf("after %v: backends %v, want %v", step.bs, ss[0].Backends, step.want)
		}
		got := map[string]uint32{}
		for b, at := range slots() {
			got[b.IP.String()] = at
		}
		if !reflect.DeepEqual(got, step.slots) {
			t.Fatalf("after %v: lb_slots %v, want %v", step.bs, got, step.slots)
		}
	}
	if err := p.DelService(s.VIP, s.Port, s.Proto); err != nil {
		t.Fatal(err)
	}
	if left := slots(); len(left) != 0 {
		t.Fatalf("lb_slots after the Service's delete: %v", left)
	}
}

// Under sessionAffinity the entries of one Service port (svcsync.Ports)
// share one affinity id, other ports have their own, a restarted Syncer
// keeps them (nothing to write), and without affinity none is left.
func TestAffinityIDPerServicePort(t *testing.T) {
	p := testPlane(t)
	key := func(s string) svcsync.Key {
		ap := netip.MustParseAddrPort(s)
		return svcsync.Key{VIP: ap.Addr(), Port: ap.Port(), Proto: dp.TCP}
	}
	bs := []dp.Backend{{IP: netip.MustParseAddr("10.244.1.5"), Port: 8080}}
	want := svcsync.Entries{key("10.96.0.9:80"): bs, key("10.250.0.2:30080"): bs, key("10.96.0.9:443"): bs}
	ports := svcsync.Ports{key("10.96.0.9:80"): "web", key("10.250.0.2:30080"): "web", key("10.96.0.9:443"): "tls"}
	ids := func() map[string]uint32 {
		ss, err := p.ListServices()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint32{}
		for _, s := range ss {
			out[netip.AddrPortFrom(s.VIP, s.Port).String()] = s.AffinityID
		}
		return out
	}
	sy, err := svcsync.NewSyncer(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sy.SyncPorts("ns/web", want, 60, ports); err != nil {
		t.Fatal(err)
	}
	got := ids()
	web, tls := got["10.96.0.9:80"], got["10.96.0.9:443"]
	if web < dp.FirstAffinityID || tls < dp.FirstAffinityID || web == tls || got["10.250.0.2:30080"] != web {
		t.Fatalf("affinity ids %v: want the clusterIP's port 80 and the node port one id, port 443 another, each at least %d", got, uint32(dp.FirstAffinityID))
	}
	restarted, err := svcsync.NewSyncer(p)
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := restarted.SyncPorts("ns/web", want, 60, ports); err != nil || ch.Total() != 0 {
		t.Fatalf("a restarted Syncer: %+v, %v; want no change", ch, err)
	}
	if after := ids(); !reflect.DeepEqual(after, got) {
		t.Fatalf("a restarted Syncer changed the ids: %v, was %v", after, got)
	}
	if _, err := restarted.SyncPorts("ns/web", want, 0, ports); err != nil {
		t.Fatal(err)
	}
	for fe, id := range ids() {
		if id != 0 {
			t.Fatalf("without sessionAffinity %s keeps affinity id %d", fe, id)
		}
	}
}

package tcbpf_test

// A differential test of the tc Service programs: random Service tables,
// drawn from a seed, go into a plane's maps through svcsync's Syncer (as
// the providers and the Kubernetes proxy write them); random packets from
// random pods go through from_pod and to_pod (BPF_PROG_TEST_RUN), and each
// outcome must be what a small model of kube-proxy's semantics says
// (svcModel below):
//   - a Service port's backends are its ready endpoints; when none is
//     ready, its serving endpoints that are terminating; when there are
//     none of those either, a new flow is rejected (ICMP port unreachable
//     from the frontend to the client; kube-proxy's REJECT);
//   - every frontend of a Service port (clusterIP, node port, external IP)
//     leads to that set; the reply from the chosen backend, and its ICMP
//     port unreachable with the quote, come back from the frontend's
//     address and port (reverse NAT); a pod reaching its own Service has
//     its source made the hairpin address;
//   - a flow's later packets keep its backend; with sessionAffinity
//     ClientIP a client's new flows keep the backend it was last placed
//     on while that is still one of the Service's (placed);
//   - across a change of the table a TCP connection keeps its backend, a
//     UDP flow while its endpoint serves (carry);
//   - a packet to no frontend (another port, another protocol, a pod's own
//     address, a clusterIP no Service has) and a reply-like packet of no
//     flow pass untouched.
//
// Both IP families through one code path (svcFamily); a world (one plane)
// is IPv4, IPv6 or dual-stack. The default run takes about 15 s; scale it with
//
//	VNETLAB_SVCDIFF_SEED=S      first world's seed (default 1)
//	VNETLAB_SVCDIFF_TABLES=N    tables in all (default 120; 4 per world, each world a fresh plane)
//	VNETLAB_SVCDIFF_PACKETS=M   new flows per table (default 80)
//
// A disagreement prints its world's seed, the table, the packet, both
// outcomes and the command that reruns that world alone.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	dp "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// tablesPerWorld: a world is one plane whose table changes this many
// times (Services added, updated in place, deleted by the Syncer).
const tablesPerWorld = 4

func TestServiceDifferential(t *testing.T) {
	seed := uint64(envInt(t, "VNETLAB_SVCDIFF_SEED", 1))
	tables := envInt(t, "VNETLAB_SVCDIFF_TABLES", 120)
	packets := envInt(t, "VNETLAB_SVCDIFF_PACKETS", 80)
	if packets*tablesPerWorld > 60000 {
		// Each probe of a world takes a source port of its own (1025 up).
		t.Fatalf("VNETLAB_SVCDIFF_PACKETS=%d: at most %d (a world's flows each have a port of their own)", packets, 60000/tablesPerWorld)
	}
	worlds := (tables + tablesPerWorld - 1) / tablesPerWorld
	var tot diffCounts
	for w := range worlds {
		s := seed + uint64(w)
		n := min(tablesPerWorld, tables-w*tablesPerWorld)
		c, bad := runWorld(t, s, n, packets)
		if bad != "" {
			t.Fatalf("%s\nrerun this world alone: VNETLAB_SVCDIFF_SEED=%d VNETLAB_SVCDIFF_TABLES=%d VNETLAB_SVCDIFF_PACKETS=%d go test -count=1 -run 'TestServiceDifferential$' ./internal/datapath/tcbpf/\n(before it, in agreement: %s)",
				bad, s, n, packets, tot.summary(w, w*tablesPerWorld))
		}
		tot.add(c)
	}
	t.Log(tot.summary(worlds, tables))
}

func (c diffCounts) summary(worlds, tables int) string {
	return fmt.Sprintf("%d worlds (%d dual-stack), %d tables, %d Service ports, %d packets: %d new flows translated (%d hairpins), %d rejected, %d replies, %d ICMP errors translated back, %d passed, %d affinity repeats, %d flows carried across a table change",
		worlds, c.dual, tables, c.ports, c.packets, c.translated, c.hairpins, c.rejected, c.replies, c.icmp, c.passed, c.affinity, c.carried)
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

type diffCounts struct {
	dual, ports, packets, translated, hairpins, rejected, replies, icmp, passed, affinity, carried int
}

func (c *diffCounts) add(o diffCounts) {
	c.dual += o.dual
	c.ports += o.ports
	c.packets += o.packets
	c.translated += o.translated
	c.hairpins += o.hairpins
	c.rejected += o.rejected
	c.replies += o.replies
	c.passed += o.passed
	c.affinity += o.affinity
	c.carried += o.carried
	c.icmp += o.icmp
}

// The generated tables.

// epState is an endpoint's conditions (EndpointSlice ready, serving, terminating).
type epState uint8

const (
	epReady       epState = iota // ready (serving, not terminating)
	epTermServing                // terminating, still serving
	epTermGone                   // terminating, no longer serving
	epNotReady                   // not ready, not terminating (starting, failing its probe)
)

func (s epState) String() string {
	return [...]string{"ready", "terminating+serving", "terminating", "not-ready"}[s]
}

type svcEndpoint struct {
	ip    netip.Addr
	state epState
}

type svcPort struct {
	port, target, nodePort uint16 // nodePort 0: none
	proto                  dp.Proto
}

type svcDef struct {
	fam         svcFamily // its clusterIP's: a dual-stack Service is one of each
	name        string
	clusterIP   netip.Addr
	externalIPs []netip.Addr
	ports       []svcPort
	affinity    uint32 // seconds; 0: sessionAffinity None
	endpoints   []svcEndpoint
}

type svcTable struct{ services []svcDef }

func (tb svcTable) String() string {
	var b strings.Builder
	for _, s := range tb.services {
		fmt.Fprintf(&b, "  %s clusterIP %s externalIPs %v affinity %ds\n", s.name, s.clusterIP, s.externalIPs, s.affinity)
		for _, p := range s.ports {
			fmt.Fprintf(&b, "    port %d/%s -> %d nodePort %d\n", p.port, p.proto, p.target, p.nodePort)
		}
		for _, e := range s.endpoints {
			fmt.Fprintf(&b, "    endpoint %s %s\n", e.ip, e.state)
		}
	}
	return b.String()
}

// frontend is one address:port/proto clients reach a Service port by.
type frontend struct {
	addr  netip.Addr
	port  uint16
	proto dp.Proto
	svc   int // index in the table
	sp    int // index in the Service's ports
}

func (f frontend) key() svcsync.Key { return svcsync.Key{VIP: f.addr, Port: f.port, Proto: f.proto} }

func (tb svcTable) frontends() []frontend {
	var out []frontend
	for i, s := range tb.services {
		for j, p := range s.ports {
			out = append(out, frontend{s.clusterIP, p.port, p.proto, i, j})
			if p.nodePort != 0 {
				out = append(out, frontend{s.fam.node, p.nodePort, p.proto, i, j})
			}
			for _, e := range s.externalIPs {
				out = append(out, frontend{e, p.port, p.proto, i, j})
			}
		}
	}
	return out
}

// svcFamily is one IP family's addresses and frames.
type svcFamily struct {
	name      string
	clusterIP func(i int) netip.Addr // 0..15
	external  func(i int) netip.Addr // 0..3
	pod       func(i int) netip.Addr // 0..199: backends, and the first svcPods clients
	node      netip.Addr
	hairpin   netip.Addr
	frame     func(src, dst netip.Addr, proto uint8, sport, dport uint16, flags uint8) []byte
	// parse reads a frame back: its protocol, ports, and whether its checksums hold.
	parse func(b []byte) (src, dst netip.AddrPort, proto uint8, l4 []byte, err error)
	// unreach is the ICMP error's protocol, type and code of a port unreachable.
	unreach [3]uint8
	// icmpErr is a port unreachable from `from` to `to` quoting the packet
	// src -> dst (as its sender sent it); quoted reads an ICMP error's quote
	// back (false: cut short, or a quoted IPv4 header's checksum wrong).
	icmpErr func(from, to netip.Addr, proto uint8, src, dst netip.AddrPort) []byte
	quoted  func(l4 []byte) (src, dst netip.AddrPort, ok bool)
}

var svcFamilies = []svcFamily{{
	name:      "ipv4",
	clusterIP: func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 96, byte(i / 4), byte(10 + i)}) },
	external:  func(i int) netip.Addr { return netip.AddrFrom4([4]byte{203, 0, 113, byte(10 + i)}) },
	pod:       func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(1 + i%2), byte(10 + i)}) },
	node:      ipOf("10.250.0.2"),
	hairpin:   ipOf(dp.HairpinIP),
	frame: func(src, dst netip.Addr, proto uint8, sport, dport uint16, flags uint8) []byte {
		return ipv4{src: src, dst: dst, proto: proto, sport: sport, dport: dport, tcpFlags: flags, payload: []byte("svcdiff"), id: sport}.bytes()
	},
	parse: func(b []byte) (netip.AddrPort, netip.AddrPort, uint8, []byte, error) {
		d, err := decode(b)
		if err == nil {
			err = checkIP(b)
		}
		if err == nil && (d.proto == protoTCP || d.proto == protoUDP) {
			err = checkL4(b)
		}
		if err == nil && d.proto == protoICM {
			err = icmpChecksum(d.l4)
		}
		return netip.AddrPortFrom(d.src, d.sport), netip.AddrPortFrom(d.dst, d.dport), d.proto, d.l4, err
	},
	unreach: [3]uint8{protoICM, 3, 3},
	icmpErr: func(from, to netip.Addr, proto uint8, src, dst netip.AddrPort) []byte {
		q := ipv4{src: src.Addr(), dst: dst.Addr(), proto: proto, sport: src.Port(), dport: dst.Port(), payload: []byte("svcdiff")}
		return icmpError(3, 3, from, to, q).bytes()
	},
	quoted: func(l4 []byte) (netip.AddrPort, netip.AddrPort, bool) {
		if len(l4) < 8+20 {
			return netip.AddrPort{}, netip.AddrPort{}, false
		}
		q := l4[8:]
		ihl := int(q[0]&0xf) * 4
		if ihl < 20 || len(q) < ihl+4 || checksum(q[:ihl]) != 0 {
			return netip.AddrPort{}, netip.AddrPort{}, false
		}
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(q[12:16])), binary.BigEndian.Uint16(q[ihl:])),
			netip.AddrPortFrom(netip.AddrFrom4([4]byte(q[16:20])), binary.BigEndian.Uint16(q[ihl+2:])), true
	},
}, {
	name: "ipv6",
	clusterIP: func(i int) netip.Addr {
		return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x96, 13: byte(i / 4), 15: byte(0x10 + i)})
	},
	external: func(i int) netip.Addr { return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(0x10 + i)}) },
	pod: func(i int) netip.Addr {
		return netip.AddrFrom16([16]byte{0xfd, 0, 2, 0x44, 7: byte(1 + i%2), 15: byte(0x10 + i)})
	},
	node:    ipOf("fd00:250::2"),
	hairpin: ipOf(dp.HairpinIP6),
	frame: func(src, dst netip.Addr, proto uint8, sport, dport uint16, flags uint8) []byte {
		return ipv6{src: src, dst: dst, proto: proto, sport: sport, dport: dport, tcpFlags: flags, payload: []byte("svcdiff")}.bytes()
	},
	parse: func(b []byte) (netip.AddrPort, netip.AddrPort, uint8, []byte, error) {
		d, err := decode6(b)
		if err == nil {
			err = checkL4v6(b)
		}
		return netip.AddrPortFrom(d.src, d.sport), netip.AddrPortFrom(d.dst, d.dport), d.proto, d.l4, err
	},
	unreach: [3]uint8{protoICMP6, 1, 4},
	icmpErr: func(from, to netip.Addr, proto uint8, src, dst netip.AddrPort) []byte {
		q := ipv6{src: src.Addr(), dst: dst.Addr(), proto: proto, sport: src.Port(), dport: dst.Port(), payload: []byte("svcdiff")}
		return icmp6Error(icmp6Unreach, 4, from, to, q, 48).bytes()
	},
	quoted: func(l4 []byte) (netip.AddrPort, netip.AddrPort, bool) {
		if len(l4) < 8+44 {
			return netip.AddrPort{}, netip.AddrPort{}, false
		}
		q := l4[8:]
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(q[8:24])), binary.BigEndian.Uint16(q[40:])),
			netip.AddrPortFrom(netip.AddrFrom16([16]byte(q[24:40])), binary.BigEndian.Uint16(q[42:])), true
	},
}}

// icmpChecksum checks an ICMP (IPv4) message's checksum.
func icmpChecksum(msg []byte) error {
	if c := checksum(msg); c != 0 {
		return fmt.Errorf("ICMP checksum wrong (residue %#04x)", c)
	}
	return nil
}

const (
	svcPods      = 12  // pods that are clients, and backends
	svcManyPods  = 200 // pods that are backends of large Services
	svcClusterIP = 16
	svcExternals = 4
)

var (
	svcPortPool   = []uint16{53, 80, 443, 5201, 8080}
	svcTargetPool = []uint16{80, 5201, 8080, 9000}
)

// genService draws a Service whose frontends are free in used (and marks them).
func genService(r *rand.Rand, fam svcFamily, name string, used map[svcsync.Key]bool) (svcDef, bool) {
	s := svcDef{fam: fam, name: name}
	var free []int
	for i := range svcClusterIP {
		if !usedAddr(used, fam.clusterIP(i)) {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return s, false
	}
	s.clusterIP = fam.clusterIP(free[r.IntN(len(free))])
	for range r.IntN(3) / 2 * (1 + r.IntN(2)) { // mostly none, sometimes one or two
		s.externalIPs = append(s.externalIPs, fam.external(r.IntN(svcExternals)))
	}
	s.externalIPs = slices.Compact(slices.SortedFunc(slices.Values(s.externalIPs), netip.Addr.Compare))
	taken := func(k svcsync.Key) bool { return used[k] }
	for range 1 + r.IntN(3) {
		p := svcPort{port: svcPortPool[r.IntN(len(svcPortPool))], target: svcTargetPool[r.IntN(len(svcTargetPool))], proto: dp.TCP}
		if r.IntN(3) == 0 {
			p.proto = dp.UDP
		}
		if taken(svcsync.Key{VIP: s.clusterIP, Port: p.port, Proto: p.proto}) {
			continue
		}
		clash := false
		for _, e := range s.externalIPs {
			clash = clash || taken(svcsync.Key{VIP: e, Port: p.port, Proto: p.proto})
		}
		if clash {
			continue
		}
		if r.IntN(3) == 0 {
			np := uint16(30000 + r.IntN(10))
			if !taken(svcsync.Key{VIP: fam.node, Port: np, Proto: p.proto}) {
				p.nodePort = np
				used[svcsync.Key{VIP: fam.node, Port: np, Proto: p.proto}] = true
			}
		}
		used[svcsync.Key{VIP: s.clusterIP, Port: p.port, Proto: p.proto}] = true
		for _, e := range s.externalIPs {
			used[svcsync.Key{VIP: e, Port: p.port, Proto: p.proto}] = true
		}
		s.ports = append(s.ports, p)
	}
	if len(s.ports) == 0 {
		return s, false
	}
	if r.IntN(3) == 0 {
		s.affinity = uint32(600 + r.IntN(10800))
	}
	s.endpoints = genEndpoints(r, fam)
	return s, true
}

func usedAddr(used map[svcsync.Key]bool, a netip.Addr) bool {
	for k := range used {
		if k.VIP == a {
			return true
		}
	}
	return false
}

// genEndpoints draws a Service's endpoints: mostly up to 4 of the pods
// that are also clients, sometimes 70 to 99 (mostly ready), whose
// backends move into slots past the first 64 when a few leave.
func genEndpoints(r *rand.Rand, fam svcFamily) []svcEndpoint {
	var eps []svcEndpoint
	pods := r.Perm(svcPods)[:r.IntN(5)]
	mostlyReady := r.IntN(12) == 0
	if mostlyReady {
		pods = r.Perm(svcManyPods)[:70+r.IntN(30)]
	}
	for _, i := range pods {
		st := epReady
		x := r.IntN(10)
		if mostlyReady && r.IntN(10) > 0 {
			x = 0
		}
		switch {
		case x >= 9:
			st = epNotReady
		case x >= 8:
			st = epTermGone
		case x >= 6:
			st = epTermServing
		}
		eps = append(eps, svcEndpoint{ip: fam.pod(i), state: st})
	}
	return eps
}

// genTable draws a table; from a previous one (prev non-nil) it keeps some
// Services (their endpoints' states and affinity changed), drops the
// others and adds new ones.
func genTable(r *rand.Rand, fams []svcFamily, prev *svcTable, next *int) svcTable {
	var tb svcTable
	used := map[svcsync.Key]bool{}
	if prev != nil {
		for _, s := range prev.services {
			if r.IntN(4) == 0 {
				continue // deleted
			}
			s.endpoints = slices.Clone(s.endpoints)
			change := r.IntN(5)
			if len(s.endpoints) > 64 {
				change = 2 // a few: the backends beyond the new count move
			}
			switch change {
			case 0:
				s.endpoints = genEndpoints(r, s.fam)
			case 1:
				for i := range s.endpoints {
					if r.IntN(2) == 0 {
						s.endpoints[i].state = epState(r.IntN(4))
					}
				}
			case 2: // a few endpoints change
				for range min(len(s.endpoints), 1+r.IntN(3)) {
					s.endpoints[r.IntN(len(s.endpoints))].state = epState(r.IntN(4))
				}
			}
			if r.IntN(5) == 0 {
				s.affinity = (1 - min(s.affinity, 1)) * uint32(600+r.IntN(10800)) // toggled
			}
			for _, f := range (svcTable{[]svcDef{s}}).frontends() {
				used[f.key()] = true
			}
			tb.services = append(tb.services, s)
		}
	}
	for range 1 + r.IntN(5) {
		*next++
		if s, ok := genService(r, fams[r.IntN(len(fams))], fmt.Sprintf("svc-%d", *next), used); ok {
			tb.services = append(tb.services, s)
		}
	}
	return tb
}

// The model: kube-proxy's semantics.

// svcModel says which backends a frontend's new flow may go to: the ready
// endpoints; when none is ready, the serving terminating ones (kube-proxy's
// ProxyTerminatingEndpoints, on by default since Kubernetes 1.26). None:
// REJECT. Every endpoint here is the cluster's (traffic policies Cluster).
func svcModel(tb svcTable, f frontend) []netip.AddrPort {
	s, p := tb.services[f.svc], tb.services[f.svc].ports[f.sp]
	var ready, serving []netip.AddrPort
	for _, e := range s.endpoints {
		b := netip.AddrPortFrom(e.ip, p.target)
		switch e.state {
		case epReady:
			ready = append(ready, b)
		case epTermServing:
			serving = append(serving, b)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return serving
}

// conditions are the endpoint's EndpointSlice conditions.
func (s epState) conditions() (ready, serving, terminating bool) {
	switch s {
	case epReady:
		return true, true, false
	case epTermServing:
		return false, true, true
	case epTermGone:
		return false, false, true
	}
	return false, false, false
}

// entries are what the proxy asks the Syncer for, one Service: each
// frontend with its backends, chosen from the endpoints' conditions as
// internal/kube/proxy's Translate chooses them (backendsFor; that layer is
// above this one, so its rule is restated here, apart from the model's:
// either one wrong is caught by the packets).
func entries(tb svcTable, i int) svcsync.Entries {
	s := tb.services[i]
	out := svcsync.Entries{}
	for _, f := range tb.frontends() {
		if f.svc != i {
			continue
		}
		target := s.ports[f.sp].target
		var ready, terminating []dp.Backend
		for _, e := range s.endpoints {
			r, sv, tm := e.state.conditions()
			b := dp.Backend{IP: e.ip, Port: target}
			switch {
			case r:
				ready = append(ready, b)
			case sv && tm:
				terminating = append(terminating, b)
			}
		}
		if len(ready) == 0 {
			ready = terminating
		} else if f.proto == dp.UDP {
			// A UDP port's other serving endpoints keep their flows.
			for _, b := range terminating {
				b.Draining = true
				ready = append(ready, b)
			}
		}
		out[f.key()] = slices.SortedFunc(slices.Values(ready), dp.CompareBackends)
	}
	return out
}

// syncTable brings the plane from table prev to tb through the Syncer:
// the Services gone are synced to nothing first (a new one may take a
// frontend of theirs), then each wanted one.
func syncTable(s *svcsync.Syncer, prev, tb *svcTable) error {
	want := map[string]bool{}
	for _, sv := range tb.services {
		want[sv.name] = true
	}
	if prev != nil {
		for _, sv := range prev.services {
			if !want[sv.name] {
				if _, err := s.Sync(sv.name, nil); err != nil {
					return err
				}
			}
		}
	}
	for i, sv := range tb.services {
		ports := svcsync.Ports{}
		for _, f := range tb.frontends() {
			if f.svc == i {
				ports[f.key()] = sv.portKey(f).String()
			}
		}
		if _, err := s.SyncPorts(sv.name, entries(*tb, i), sv.affinity, ports); err != nil {
			return err
		}
	}
	return nil
}

// portKey names the Service port frontend f serves: its clusterIP's key.
func (s svcDef) portKey(f frontend) svcsync.Key {
	return svcsync.Key{VIP: s.clusterIP, Port: s.ports[f.sp].port, Proto: f.proto}
}

// The packets.

// world runs one plane through n tables of one family or both.
type world struct {
	t     *testing.T
	p     *dp.Plane
	r     *rand.Rand
	fams  []svcFamily // the world's
	fam   svcFamily   // the current packet's
	tb    svcTable
	tbIdx int
	sport uint16
	c     diffCounts
	// affinity: a client's backend per frontend (placed).
	affinity map[affinityKey]remembered
	// open: flows left open for the next table, whose packets then go on.
	open []openFlow
	// last: the L4 bytes of the last packet a program returned.
	last []byte
}

// openFlow is a translated flow, open across a change of the table.
type openFlow struct {
	fam     svcFamily
	client  netip.AddrPort // as it sent its packets
	src     netip.AddrPort // as its backend sees it (the hairpin address for a hairpin)
	key     svcsync.Key    // its frontend
	svc     string         // its Service
	backend netip.AddrPort
}

func (of openFlow) String() string {
	return fmt.Sprintf("%s -> %s/%s of %s, open on backend %s", of.client, of.key.Frontend(), of.key.Proto, of.svc, of.backend)
}

type affinityKey struct {
	client netip.Addr
	svc    string
	fe     svcsync.Key
}

// remembered: the backend a client's last new flow was placed on, the
// frontend it reached, and the table it was placed under.
type remembered struct {
	backend netip.AddrPort
	via     svcsync.Key
	table   int
}

func runWorld(t *testing.T, seed uint64, n, packets int) (diffCounts, string) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	p := testPlane(t) // closed at the world's end too: its preallocated maps are large
	defer p.Close()
	w := &world{t: t, p: p, r: r, sport: 1024, affinity: map[affinityKey]remembered{}}
	switch r.IntN(3) {
	case 0, 1:
		w.fams = svcFamilies[r.IntN(2):][:1]
	default:
		w.fams = svcFamilies // dual-stack: both in one plane
		w.c.dual++
	}
	var famNames []string
	for _, f := range w.fams {
		famNames = append(famNames, f.name)
	}
	sy, err := svcsync.NewSyncer(w.p)
	if err != nil {
		t.Fatal(err)
	}
	var prev *svcTable
	next := 0
	var history strings.Builder // the tables before this one
	for w.tbIdx = range n {
		if prev != nil {
			fmt.Fprintf(&history, "table %d:\n%s", w.tbIdx-1, prev)
		}
		w.tb = genTable(r, w.fams, prev, &next)
		if err := syncTable(sy, prev, &w.tb); err != nil {
			t.Fatalf("seed %d table %d: sync: %v\n%s", seed, w.tbIdx, err, w.tb)
		}
		w.forget()
		for _, s := range w.tb.services {
			w.c.ports += len(s.ports)
		}
		fail := func(bad string) string {
			return fmt.Sprintf("seed %d (%s), table %d of %d:\n%s%s(the tables before, synced in turn:\n%s)",
				seed, strings.Join(famNames, "+"), w.tbIdx, n, w.tb, bad, history.String())
		}
		open := w.open
		w.open = nil
		for _, of := range open {
			if bad := w.carry(of); bad != "" {
				return w.c, fail(bad)
			}
		}
		for range packets {
			if bad := w.probe(); bad != "" {
				return w.c, fail(bad)
			}
		}
		cur := w.tb
		prev = &cur
	}
	return w.c, ""
}

// outcome is what a program did to a packet, as the model states it.
type outcome struct {
	verdict  string // "pass" (untouched), "nat", "reject"
	src, dst netip.AddrPort
}

func (o outcome) String() string {
	if o.verdict == "pass" {
		return "passed untouched"
	}
	return fmt.Sprintf("%s %s -> %s", o.verdict, o.src, o.dst)
}

// send runs prog on frame in and reads the outcome; a malformed result
// (bad checksum, a return code that is none of the three) is a verdict of its own.
func (w *world) send(prog string, in []byte) outcome {
	ps := w.p.Objects()
	pr := ps.FromPod
	if prog == "to_pod" {
		pr = ps.ToPod
	}
	ret, out, err := pr.Test(in)
	if err != nil {
		w.t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	src, dst, proto, l4, perr := w.fam.parse(out)
	w.last = l4
	switch {
	case ret == actOK && bytes.Equal(in, out):
		return outcome{verdict: "pass"}
	case perr != nil:
		return outcome{verdict: fmt.Sprintf("return code %d, malformed (%v)", int32(ret), perr)}
	case ret == actOK:
		return outcome{verdict: "nat", src: src, dst: dst}
	case ret == actRedirect && proto == w.fam.unreach[0] && len(l4) >= 8 && l4[0] == w.fam.unreach[1] && l4[1] == w.fam.unreach[2]:
		// The quote's ports: after the quoted IP header.
		q := l4[8:]
		qip := 20
		if w.fam.name == "ipv6" {
			qip = 40
		}
		if len(q) < qip+4 {
			return outcome{verdict: "reject with a short quote"}
		}
		// Read as the flow it refuses: from the frontend the quote was
		// sent to, to the client that sent it.
		fe := netip.AddrPortFrom(src.Addr(), binary.BigEndian.Uint16(q[qip+2:]))
		cl := netip.AddrPortFrom(dst.Addr(), binary.BigEndian.Uint16(q[qip:]))
		return outcome{verdict: "reject", src: fe, dst: cl}
	}
	return outcome{verdict: fmt.Sprintf("return code %d, %s -> %s proto %d", int32(ret), src, dst, proto)}
}

func (w *world) nextPort() uint16 {
	w.sport++
	return w.sport
}

func protoNum(p dp.Proto) uint8 { return uint8(p) }

// probe sends one new flow (and its next packet and reply) or one packet
// of no Service, and compares each outcome with the model's. It returns
// the disagreement, if any.
func (w *world) probe() string {
	fs := w.tb.frontends()
	sport := w.nextPort()
	if len(fs) == 0 || w.r.IntN(4) == 0 {
		w.fam = w.fams[w.r.IntN(len(w.fams))]
		return w.probeNoService(fs, w.fam.pod(w.r.IntN(svcPods)), sport)
	}
	f := fs[w.r.IntN(len(fs))]
	w.fam = w.tb.services[f.svc].fam
	client := w.fam.pod(w.r.IntN(svcPods))
	proto := protoNum(f.proto)
	first := uint8(0)
	if f.proto == dp.TCP {
		first = tcpSYN
	}
	in := w.fam.frame(client, f.addr, proto, sport, f.port, first)
	got := w.send("from_pod", in)
	w.c.packets++
	fe := netip.AddrPortFrom(f.addr, f.port)
	cl := netip.AddrPortFrom(client, sport)
	desc := fmt.Sprintf("packet: %s -> %s/%s (new flow) through from_pod\n", cl, fe, f.proto)
	allowed := svcModel(w.tb, f)
	if len(allowed) == 0 {
		want := outcome{verdict: "reject", src: fe, dst: cl}
		if got != want {
			return desc + fmt.Sprintf("model: %s (no endpoint serves)\nplane: %s\n", want, got)
		}
		w.c.rejected++
		return ""
	}
	if got.verdict != "nat" || !slices.Contains(allowed, got.dst) {
		return desc + fmt.Sprintf("model: nat to one of %v\nplane: %s\n", allowed, got)
	}
	src := cl
	if client == got.dst.Addr() {
		src = netip.AddrPortFrom(w.fam.hairpin, sport)
		w.c.hairpins++
	}
	if got.src != src {
		return desc + fmt.Sprintf("model: nat from %s\nplane: %s\n", src, got)
	}
	w.c.translated++
	if bad := w.placed(f, client, got.dst, allowed); bad != "" {
		return desc + bad + fmt.Sprintf("plane: %s\n", got)
	}
	// The flow's next packet keeps its backend.
	again := uint8(0)
	if f.proto == dp.TCP {
		again = tcpACK
	}
	next := w.send("from_pod", w.fam.frame(client, f.addr, proto, sport, f.port, again))
	w.c.packets++
	if next != got {
		return desc + fmt.Sprintf("its next packet: model: %s (the flow's backend)\nplane: %s\n", got, next)
	}
	// The backend's reply comes back from the frontend. A hairpin's leaves
	// the client itself, through from_pod.
	prog := "to_pod"
	if src.Addr() == w.fam.hairpin {
		prog = "from_pod"
	}
	rep := w.send(prog, w.fam.frame(got.dst.Addr(), src.Addr(), proto, got.dst.Port(), sport, again|tcpACK))
	w.c.packets++
	want := outcome{verdict: "nat", src: fe, dst: cl}
	if rep != want {
		return desc + fmt.Sprintf("the reply %s -> %s through %s: model: %s\nplane: %s\n", got.dst, src, prog, want, rep)
	}
	w.c.replies++
	if w.r.IntN(4) == 0 {
		// The backend's port unreachable about the flow comes back as the
		// frontend's, about the packet the client sent.
		in := w.fam.icmpErr(got.dst.Addr(), src.Addr(), proto, src, got.dst)
		errOut := w.send(prog, in)
		w.c.packets++
		ok := errOut.verdict == "nat" && errOut.src.Addr() == fe.Addr() && errOut.dst.Addr() == client
		var qs, qd netip.AddrPort
		if ok {
			qs, qd, ok = w.fam.quoted(w.last)
		}
		if !ok || qs != cl || qd != fe {
			return desc + fmt.Sprintf("the backend's port unreachable %s -> %s through %s: model: from %s to %s quoting %s -> %s\nplane: %s, quoting %s -> %s\n",
				got.dst.Addr(), src.Addr(), prog, fe.Addr(), client, cl, fe, errOut, qs, qd)
		}
		w.c.icmp++
	}
	// A quarter of the flows stay open into the next table; every flow of a
	// large Service, whose backends may move when a few endpoints leave.
	if w.r.IntN(4) == 0 || len(w.tb.services[f.svc].endpoints) > 64 {
		w.open = append(w.open, openFlow{fam: w.fam, client: cl, src: src, key: f.key(), svc: w.tb.services[f.svc].name, backend: got.dst})
	}
	return ""
}

// carry sends the next packet of a flow opened under the table before,
// and its reply. As kube-proxy's conntrack holds them:
//   - a TCP connection keeps its backend whatever became of its Service
//     (deleted, emptied, its backend gone);
//   - a UDP flow keeps its backend while that is a serving endpoint of the
//     Service port, ready or terminating (kube-proxy's CleanStaleEntries
//     deletes only the flows of endpoints that stopped serving); else its
//     next datagram is a new flow. Not checked: the flows of a Service
//     deleted, or left with no serving endpoint at all (kube-proxy's
//     cleanup then leaves their entries to time out).
func (w *world) carry(of openFlow) string {
	w.fam = of.fam
	proto := protoNum(of.key.Proto)
	flags := uint8(0)
	if of.key.Proto == dp.TCP {
		flags = tcpACK
	}
	keep := outcome{verdict: "nat", src: of.src, dst: of.backend}
	var allowed []netip.AddrPort
	if of.key.Proto == dp.UDP {
		f, svc, ok := w.frontendOf(of.key)
		if !ok || svc != of.svc || !w.anyServing(f) {
			return ""
		}
		if !w.serving(f, of.backend) {
			allowed = svcModel(w.tb, f)
			keep = outcome{}
		}
	}
	desc := fmt.Sprintf("packet: the next of the flow %s, through from_pod after the table changed\n", of)
	got := w.send("from_pod", w.fam.frame(of.client.Addr(), of.key.VIP, proto, of.client.Port(), of.key.Port, flags))
	w.c.packets++
	w.c.carried++
	switch {
	case keep.verdict != "":
		if got != keep {
			return desc + fmt.Sprintf("model: %s (the flow's backend)\nplane: %s\n", keep, got)
		}
	default:
		src := of.client
		if got.dst.Addr() == of.client.Addr() {
			src = netip.AddrPortFrom(w.fam.hairpin, of.client.Port())
		}
		if got.verdict != "nat" || !slices.Contains(allowed, got.dst) || got.src != src {
			return desc + fmt.Sprintf("model: nat to one of %v (its backend left)\nplane: %s\n", allowed, got)
		}
		f, _, _ := w.frontendOf(of.key)
		if bad := w.placed(f, of.client.Addr(), got.dst, allowed); bad != "" {
			return desc + bad + fmt.Sprintf("plane: %s\n", got)
		}
	}
	prog := "to_pod"
	if got.src.Addr() == w.fam.hairpin {
		prog = "from_pod"
	}
	rep := w.send(prog, w.fam.frame(got.dst.Addr(), got.src.Addr(), proto, got.dst.Port(), of.client.Port(), flags))
	w.c.packets++
	if want := (outcome{verdict: "nat", src: of.key.Frontend(), dst: of.client}); rep != want {
		return desc + fmt.Sprintf("the reply %s -> %s through %s: model: %s\nplane: %s\n", got.dst, got.src, prog, want, rep)
	}
	return ""
}

// frontendOf finds the frontend k in the table, and its Service's name.
func (w *world) frontendOf(k svcsync.Key) (frontend, string, bool) {
	for _, f := range w.tb.frontends() {
		if f.key() == k {
			return f, w.tb.services[f.svc].name, true
		}
	}
	return frontend{}, "", false
}

// anyServing: some endpoint of f's Service serves.
func (w *world) anyServing(f frontend) bool {
	for _, e := range w.tb.services[f.svc].endpoints {
		if e.state == epReady || e.state == epTermServing {
			return true
		}
	}
	return false
}

// serving: b is a serving endpoint of f's Service port (ready, or
// terminating and still serving).
func (w *world) serving(f frontend, b netip.AddrPort) bool {
	s := w.tb.services[f.svc]
	for _, e := range s.endpoints {
		if netip.AddrPortFrom(e.ip, s.ports[f.sp].target) == b && (e.state == epReady || e.state == epTermServing) {
			return true
		}
	}
	return false
}

// placed checks a new flow's backend b against the client's sessionAffinity
// and remembers it: while the backend remembered is one of allowed (the
// frontend's backends for new flows now), a new flow goes there; else
// anywhere, and the client's memory becomes that. The memory outlives a
// change of the table while its Service keeps sessionAffinity.
//
// kube-proxy remembers a client's endpoint per Service port: every
// frontend of the port (clusterIP, node port, external IP) leads to the
// same (the plane: lb_svc.affinity_id, the Syncer's Ports).
func (w *world) placed(f frontend, client netip.Addr, b netip.AddrPort, allowed []netip.AddrPort) string {
	s := w.tb.services[f.svc]
	if s.affinity == 0 {
		return ""
	}
	k := affinityKey{client, s.name, s.portKey(f)}
	if m, ok := w.affinity[k]; ok && slices.Contains(allowed, m.backend) {
		if m.backend != b {
			return fmt.Sprintf("model: sessionAffinity ClientIP: the client's earlier flow (to %s/%s, table %d) went to %s\n", m.via.Frontend(), m.via.Proto, m.table, m.backend)
		}
		w.c.affinity++
	}
	w.affinity[k] = remembered{b, f.key(), w.tbIdx}
	return ""
}

// forget drops the memories of Services gone, or without sessionAffinity now.
func (w *world) forget() {
	keeps := map[string]bool{}
	for _, s := range w.tb.services {
		keeps[s.name] = s.affinity > 0
	}
	maps.DeleteFunc(w.affinity, func(k affinityKey, _ remembered) bool { return !keeps[k.svc] })
}

// probeNoService sends a packet no Service owns: it must pass untouched.
func (w *world) probeNoService(fs []frontend, client netip.Addr, sport uint16) string {
	proto := uint8(protoTCP)
	flags := uint8(tcpSYN)
	if w.r.IntN(3) == 0 {
		proto, flags = protoUDP, 0
	}
	owned := map[svcsync.Key]bool{}
	for _, f := range fs {
		owned[f.key()] = true
	}
	fs = slices.DeleteFunc(slices.Clone(fs), func(f frontend) bool { return f.addr.Is6() != client.Is6() })
	var dst netip.Addr
	var dport uint16
	prog := "from_pod"
	switch w.r.IntN(4) {
	case 0: // a frontend's address, a port or protocol it does not serve
		if len(fs) > 0 {
			f := fs[w.r.IntN(len(fs))]
			dst, dport = f.addr, svcPortPool[w.r.IntN(len(svcPortPool))]
			if w.r.IntN(2) == 0 {
				dport = f.port
				if f.proto == dp.TCP {
					proto, flags = protoUDP, 0
				} else {
					proto, flags = protoTCP, tcpSYN
				}
			}
			break
		}
		fallthrough
	case 1: // a clusterIP of the range, maybe no Service's
		dst, dport = w.fam.clusterIP(w.r.IntN(svcClusterIP)), svcPortPool[w.r.IntN(len(svcPortPool))]
	case 2: // a pod, directly
		dst, dport = w.fam.pod(w.r.IntN(svcPods)), svcTargetPool[w.r.IntN(len(svcTargetPool))]
	case 3: // a reply-like packet of no flow, arriving at a pod
		prog = "to_pod"
		dst, dport = client, sport
		client, sport = w.fam.pod(w.r.IntN(svcPods)), svcTargetPool[w.r.IntN(len(svcTargetPool))]
		flags |= tcpACK
	}
	if owned[svcsync.Key{VIP: dst, Port: dport, Proto: dp.Proto(proto)}] && prog == "from_pod" {
		return "" // drawn onto a frontend after all
	}
	if proto == protoUDP {
		flags = 0
	}
	in := w.fam.frame(client, dst, proto, sport, dport, flags)
	got := w.send(prog, in)
	w.c.packets++
	if got.verdict != "pass" {
		return fmt.Sprintf("packet: %s -> %s proto %d (no Service's) through %s\nmodel: passed untouched\nplane: %s\n",
			netip.AddrPortFrom(client, sport), netip.AddrPortFrom(dst, dport), proto, prog, got)
	}
	w.c.passed++
	return ""
}

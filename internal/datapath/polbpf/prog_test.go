package polbpf

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// BPF_PROG_TEST_RUN of pol_egress and pol_ingress on crafted frames: the
// verdicts of ports, ranges, ipBlocks with excepts, replies, generations,
// Service frontends, fragments and IPv6 extension headers, both families.

const (
	tcActUnspec = -1
	tcActShot   = 2
)

var (
	podA  = netip.MustParseAddr("10.0.0.1")
	podB  = netip.MustParseAddr("10.0.0.2")
	podC  = netip.MustParseAddr("10.0.0.3")
	podA6 = netip.MustParseAddr("fd00::1")
	podB6 = netip.MustParseAddr("fd00::2")
	podC6 = netip.MustParseAddr("fd00::3")
	vip   = netip.MustParseAddr("10.96.0.10")
	vip6  = netip.MustParseAddr("fd96::10")
)

// testRules: pod-a isolated both ways, pod-b and pod-c not.
//   - pod-a's ingress: from pod-b on TCP 80; from 192.168.0.0/16 except
//     192.168.1.0/24 (and fd10::/32 except fd10:0:1::/48) on UDP 5000-5010;
//   - pod-a's egress: to pod-b on TCP 8080-8090; to 172.16.0.0/12 and
//     fd20::/16 on every protocol and port.
func testRules() *netpol.Rules {
	pfx := netip.MustParsePrefix
	return &netpol.Rules{Pods: []netpol.PodRules{
		{Pod: "pod-a", Namespace: "x", IPs: []netip.Addr{podA, podA6},
			Ingress: netpol.Side{Isolated: true, Allow: []*netpol.Allow{
				{Pods: []netip.Addr{podB, podB6}, Ports: []netpol.PortRange{{Proto: netpol.TCP, First: 80, Last: 80}}},
				{Blocks: []netpol.Block{
					{CIDR: pfx("192.168.0.0/16"), Except: []netip.Prefix{pfx("192.168.1.0/24")}},
					{CIDR: pfx("fd10::/32"), Except: []netip.Prefix{pfx("fd10:0:1::/48")}}},
					Ports: []netpol.PortRange{{Proto: netpol.UDP, First: 5000, Last: 5010}}},
			}},
			Egress: netpol.Side{Isolated: true, Allow: []*netpol.Allow{
				{Pods: []netip.Addr{podB, podB6}, Ports: []netpol.PortRange{{Proto: netpol.TCP, First: 8080, Last: 8090}}},
				{Blocks: []netpol.Block{{CIDR: pfx("172.16.0.0/12")}, {CIDR: pfx("fd20::/16")}}, AnyPort: true},
			}},
		},
		{Pod: "pod-b", Namespace: "x", IPs: []netip.Addr{podB, podB6}},
		{Pod: "pod-c", Namespace: "x", IPs: []netip.Addr{podC, podC6}},
	}}
}

// testPlane opens a plane in a directory of its own under vnetlab's bpffs
// root, removed when the test ends, with frontend maps holding vip:80/TCP
// and vip6:80/TCP.
func testPlane(t testing.TB) *Plane {
	t.Helper()
	return testPlaneFamily(t, family.Dual)
}

// testPlaneFamily is testPlane with its maps made for fam.
func testPlaneFamily(t testing.TB, fam family.Family) *Plane {
	t.Helper()
	return testPlaneLife(t, fam, DefaultFlowLifetimes)
}

// testPlaneLife is testPlaneFamily with its programs loaded with the flow
// lifetimes life.
func testPlaneLife(t testing.TB, fam family.Family, life FlowLifetimes) *Plane {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (BPF)")
	}
	dir := filepath.Join("/sys/fs/bpf/vnetlab", fmt.Sprintf("polbpf-test-%d", os.Getpid()), "policy")
	_ = os.RemoveAll(filepath.Dir(dir))
	spec, err := loadPolicy()
	if err != nil {
		t.Fatal(err)
	}
	fe4, err := ebpf.NewMap(spec.Maps["pol4_frontends"])
	if err != nil {
		t.Fatal(err)
	}
	fe6, err := ebpf.NewMap(spec.Maps["pol6_frontends"])
	if err != nil {
		t.Fatal(err)
	}
	val := make([]byte, fe4.ValueSize())
	k4 := append(append(vip.AsSlice(), 0, 80), protoTCP, 0)
	k6 := append(append(vip6.AsSlice(), 0, 80), protoTCP, 0)
	if err := fe4.Put(k4, val); err != nil {
		t.Fatal(err)
	}
	if err := fe6.Put(k6, val); err != nil {
		t.Fatal(err)
	}
	p, err := OpenFamily(dir, fam, Frontends{V4: fe4, V6: fe6})
	if err != nil {
		t.Fatal(err)
	}
	p.life = life
	t.Cleanup(func() {
		p.Close()
		fe4.Close()
		fe6.Close()
		if err := Remove(dir); err != nil {
			t.Error(err)
		}
		os.RemoveAll(filepath.Dir(dir))
	})
	if _, err := p.programs(); err != nil {
		t.Fatal(err)
	}
	return p
}

// run passes f through the program of the direction (egress: the pod sends
// it) and returns its verdict.
func run(t testing.TB, p *Plane, egress bool, f frame) int {
	t.Helper()
	prog := p.progs.PolIngress
	if egress {
		prog = p.progs.PolEgress
	}
	ret, err := prog.Run(&ebpf.RunOptions{Data: f.bytes()})
	if err != nil {
		t.Fatal(err)
	}
	return int(int32(ret))
}

type verdictCase struct {
	name   string
	egress bool
	f      frame
	pass   bool
}

func checkVerdicts(t *testing.T, p *Plane, cases []verdictCase) {
	t.Helper()
	for _, c := range cases {
		got := run(t, p, c.egress, c.f)
		want := tcActShot
		if c.pass {
			want = tcActUnspec
		}
		if got != want {
			t.Errorf("%s: verdict %d, want %d (pass %v)", c.name, got, want, c.pass)
		}
	}
}

func TestVerdicts(t *testing.T) {
	p := testPlane(t)
	if _, err := p.Load(testRules()); err != nil {
		t.Fatal(err)
	}
	a6, b6, c6 := podA6, podB6, podC6
	ext := netip.MustParseAddr
	var cases []verdictCase
	sport := uint16(40000)
	next := func() uint16 { sport++; return sport }
	for _, fam := range []struct {
		name                           string
		a, b, c, inBlock, inExcept, eg string
	}{
		{"ipv4", podA.String(), podB.String(), podC.String(), "192.168.2.5", "192.168.1.7", "172.20.1.1"},
		{"ipv6", a6.String(), b6.String(), c6.String(), "fd10:0:2::5", "fd10:0:1::7", "fd20::9"},
	} {
		a, b, c := ext(fam.a), ext(fam.b), ext(fam.c)
		icmp := uint8(protoICMP)
		world := ext("8.8.8.8")
		if a.Is6() {
			icmp = protoICMP6
			world = ext("2001:db8::8")
		}
		cases = append(cases,
			verdictCase{fam.name + " ingress from pod-b on its port", false, frame{src: b, dst: a, proto: protoTCP, sport: next(), dport: 80}, true},
			verdictCase{fam.name + " ingress from pod-b on another port", false, frame{src: b, dst: a, proto: protoTCP, sport: next(), dport: 81}, false},
			verdictCase{fam.name + " ingress from pod-b on UDP", false, frame{src: b, dst: a, proto: protoUDP, sport: next(), dport: 80}, false},
			verdictCase{fam.name + " ingress from pod-c", false, frame{src: c, dst: a, proto: protoTCP, sport: next(), dport: 80}, false},
			verdictCase{fam.name + " ingress from the block, range start", false, frame{src: ext(fam.inBlock), dst: a, proto: protoUDP, sport: next(), dport: 5000}, true},
			verdictCase{fam.name + " ingress from the block, range end", false, frame{src: ext(fam.inBlock), dst: a, proto: protoUDP, sport: next(), dport: 5010}, true},
			verdictCase{fam.name + " ingress from the block, past the range", false, frame{src: ext(fam.inBlock), dst: a, proto: protoUDP, sport: next(), dport: 5011}, false},
			verdictCase{fam.name + " ingress from the block, below the range", false, frame{src: ext(fam.inBlock), dst: a, proto: protoUDP, sport: next(), dport: 4999}, false},
			verdictCase{fam.name + " ingress from the except", false, frame{src: ext(fam.inExcept), dst: a, proto: protoUDP, sport: next(), dport: 5005}, false},
			verdictCase{fam.name + " egress to pod-b in its range", true, frame{src: a, dst: b, proto: protoTCP, sport: next(), dport: 8085}, true},
			verdictCase{fam.name + " egress to pod-b past its range", true, frame{src: a, dst: b, proto: protoTCP, sport: next(), dport: 8091}, false},
			verdictCase{fam.name + " egress to pod-c", true, frame{src: a, dst: c, proto: protoTCP, sport: next(), dport: 8085}, false},
			verdictCase{fam.name + " egress to the any-port block, ICMP", true, frame{src: a, dst: ext(fam.eg), proto: icmp, icmpType: 8}, true},
			verdictCase{fam.name + " egress to the any-port block, UDP", true, frame{src: a, dst: ext(fam.eg), proto: protoUDP, sport: next(), dport: 53}, true},
			verdictCase{fam.name + " egress to the world", true, frame{src: a, dst: world, proto: protoTCP, sport: next(), dport: 443}, false},
			verdictCase{fam.name + " pod-c to pod-b: neither isolated", false, frame{src: c, dst: b, proto: protoTCP, sport: next(), dport: 9}, true},
			verdictCase{fam.name + " pod-c sends to pod-b: neither isolated", true, frame{src: c, dst: b, proto: protoTCP, sport: next(), dport: 9}, true},
		)
	}
	checkVerdicts(t, p, cases)
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	// Every case at pod-a is a decision; pod-b's and pod-c's pass unlooked.
	if c.Allowed != 12 || c.Denied != 18 || c.Unisolated != 4 || c.Evaluated() != 30 || c.Dropped() != 18 {
		t.Errorf("counters %+v: want 12 allowed, 18 denied, 4 unisolated", c)
	}
	n, err := p.Objects()
	if err != nil {
		t.Fatal(err)
	}
	if want := Compile(testRules()).Count(); n != want || n == 0 {
		t.Errorf("read back %d map entries, compiled %d", n, want)
	}
}

// TestFlows: an allowed flow's next packets and its replies pass by its
// entry; after a new load the initiator's next packet is decided again,
// while a reply of a flow decided before still passes.
func TestFlows(t *testing.T) {
	p := testPlane(t)
	if _, err := p.Load(testRules()); err != nil {
		t.Fatal(err)
	}
	for _, ips := range [][2]netip.Addr{{podA, podB}, {podA6, podB6}} {
		a, b := ips[0], ips[1]
		out := frame{src: a, dst: b, proto: protoTCP, sport: 41000, dport: 8085}
		reply := frame{src: b, dst: a, proto: protoTCP, sport: 8085, dport: 41000}
		in := frame{src: b, dst: a, proto: protoTCP, sport: 42000, dport: 80}
		inReply := frame{src: a, dst: b, proto: protoTCP, sport: 80, dport: 42000}
		checkVerdicts(t, p, []verdictCase{
			{"reply before any flow", false, reply, false},
			{"first packet", true, out, true},
			{"second packet", true, out, true},
			{"reply at pod-a's ingress (isolated: pod-b:8085 is no allowed source)", false, reply, true},
			{"an inbound connection", false, in, true},
			{"its reply at pod-a's egress (isolated: pod-b:42000 is no allowed destination)", true, inReply, true},
		})
	}
	before, _ := p.Counters()
	if before.Flow != 6 || before.Allowed != 4 || before.Denied != 2 {
		t.Errorf("counters %+v: want 6 by flow entries, 4 allowed, 2 denied", before)
	}
	// New rules: pod-a's egress may no longer reach pod-b.
	r := testRules()
	r.Pods[0].Egress.Allow = r.Pods[0].Egress.Allow[1:]
	if _, err := p.Load(r); err != nil {
		t.Fatal(err)
	}
	if g, _ := p.Gen(); g != 2 {
		t.Errorf("generation %d after two loads", g)
	}
	for _, ips := range [][2]netip.Addr{{podA, podB}, {podA6, podB6}} {
		a, b := ips[0], ips[1]
		checkVerdicts(t, p, []verdictCase{
			{"a reply of the inbound flow still passes", true, frame{src: a, dst: b, proto: protoTCP, sport: 80, dport: 42000}, true},
			{"the outbound flow's next packet is decided again", true, frame{src: a, dst: b, proto: protoTCP, sport: 41000, dport: 8085}, false},
			{"and its reply entry went with it", false, frame{src: b, dst: a, proto: protoTCP, sport: 8085, dport: 41000}, false},
		})
	}
}

// TestFlowLifetimes: a flow's entries live their protocol's lifetime after
// the last packet that used them, each packet refreshing them; an expired
// entry is as if absent. pod-a is isolated both ways, and its egress
// allows neither reply's destination: only the inbound flow's entry lets
// the reply out.
func TestFlowLifetimes(t *testing.T) {
	const other = 3 * time.Second
	p := testPlaneLife(t, family.Dual, FlowLifetimes{TCP: time.Hour, Other: other})
	if _, err := p.Load(testRules()); err != nil {
		t.Fatal(err)
	}
	type flow struct{ in, reply frame }
	var udp, tcp []flow
	for _, ips := range [][3]netip.Addr{{podA, podB, netip.MustParseAddr("192.168.5.5")}, {podA6, podB6, netip.MustParseAddr("fd10:0:5::5")}} {
		a, b, block := ips[0], ips[1], ips[2]
		udp = append(udp, flow{frame{src: block, dst: a, proto: protoUDP, sport: 40000, dport: 5005}, frame{src: a, dst: block, proto: protoUDP, sport: 5005, dport: 40000}})
		tcp = append(tcp, flow{frame{src: b, dst: a, proto: protoTCP, sport: 42000, dport: 80}, frame{src: a, dst: b, proto: protoTCP, sport: 80, dport: 42000}})
	}
	for _, f := range append(slices.Clone(udp), tcp...) {
		checkVerdicts(t, p, []verdictCase{
			{fmt.Sprintf("%v: the inbound flow", f.in.proto), false, f.in, true},
			{fmt.Sprintf("%v: its reply", f.in.proto), true, f.reply, true},
		})
	}
	// The UDP replies go on for more than the lifetime, a packet each
	// half second: each refreshes its entries.
	for end := time.Now().Add(other + time.Second); time.Now().Before(end); {
		time.Sleep(500 * time.Millisecond)
		for _, f := range udp {
			checkVerdicts(t, p, []verdictCase{{"a UDP reply within its lifetime", true, f.reply, true}})
		}
	}
	time.Sleep(other + 500*time.Millisecond)
	for _, f := range udp {
		checkVerdicts(t, p, []verdictCase{
			{"a UDP reply after its flow's lifetime (its entry expired: decided as a new flow)", true, f.reply, false},
			{"the inbound flow's next packet, decided again", false, f.in, true},
			{"its reply again", true, f.reply, true},
		})
	}
	for _, f := range tcp {
		checkVerdicts(t, p, []verdictCase{{"a TCP reply after UDP's lifetime, within TCP's", true, f.reply, true}})
	}
}

// TestServiceFrontend: pod-a's egress to a Service frontend is deferred;
// the backend's ingress decides pod-a's egress against the translated
// address, and the translated-back reply passes pod-a's ingress.
func TestServiceFrontend(t *testing.T) {
	p := testPlane(t)
	if _, err := p.Load(testRules()); err != nil {
		t.Fatal(err)
	}
	for _, fam := range [][4]netip.Addr{{podA, podB, podC, vip}, {podA6, podB6, podC6, vip6}} {
		a, b, c, v := fam[0], fam[1], fam[2], fam[3]
		checkVerdicts(t, p, []verdictCase{
			{"pod-a to the clusterIP: deferred", true, frame{src: a, dst: v, proto: protoTCP, sport: 43000, dport: 80}, true},
			{"translated to pod-b:8085: pod-a's egress allows it", false, frame{src: a, dst: b, proto: protoTCP, sport: 43000, dport: 8085}, true},
			{"pod-b's reply", true, frame{src: b, dst: a, proto: protoTCP, sport: 8085, dport: 43000}, true},
			{"translated back from the clusterIP", false, frame{src: v, dst: a, proto: protoTCP, sport: 80, dport: 43000}, true},
			{"pod-a to the clusterIP, another flow", true, frame{src: a, dst: v, proto: protoTCP, sport: 43001, dport: 80}, true},
			{"translated to pod-c: pod-a's egress denies it", false, frame{src: a, dst: c, proto: protoTCP, sport: 43001, dport: 8085}, false},
			{"the clusterIP on a port no Service has: decided at pod-a", true, frame{src: a, dst: v, proto: protoTCP, sport: 43002, dport: 81}, false},
		})
	}
	hair := []verdictCase{
		{"pod-a reaching itself through a Service (hairpin source)", false, frame{src: netip.MustParseAddr("169.254.42.1"), dst: podA, proto: protoTCP, sport: 43003, dport: 9999}, true},
		{"and its reply", true, frame{src: podA, dst: netip.MustParseAddr("169.254.42.1"), proto: protoTCP, sport: 9999, dport: 43003}, true},
		{"IPv6 hairpin", false, frame{src: netip.MustParseAddr("100::a9fe:2a01"), dst: podA6, proto: protoTCP, sport: 43003, dport: 9999}, true},
	}
	checkVerdicts(t, p, hair)
	c, _ := p.Counters()
	if c.Deferred != 4 || c.Hairpin != 3 {
		t.Errorf("counters %+v: want 4 deferred, 3 hairpin", c)
	}
}

// TestFragments: a later fragment (no ports) follows its datagram's first
// fragment; one whose first fragment was not allowed here is dropped at an
// isolated pod and passes at a pod that is not isolated.
func TestFragments(t *testing.T) {
	p := testPlane(t)
	if _, err := p.Load(testRules()); err != nil {
		t.Fatal(err)
	}
	for _, fam := range [][3]netip.Addr{
		{netip.MustParseAddr("192.168.2.5"), podA, podB},
		{netip.MustParseAddr("fd10:0:2::5"), podA6, podB6},
	} {
		src, a, b := fam[0], fam[1], fam[2]
		checkVerdicts(t, p, []verdictCase{
			{"first fragment, allowed port", false, frame{src: src, dst: a, proto: protoUDP, sport: 7, dport: 5005, id: 100, more: true}, true},
			{"its second fragment", false, frame{src: src, dst: a, proto: protoUDP, id: 100, fragOff: 3, more: true}, true},
			{"its last fragment", false, frame{src: src, dst: a, proto: protoUDP, id: 100, fragOff: 6}, true},
			{"first fragment, denied port", false, frame{src: src, dst: a, proto: protoUDP, sport: 7, dport: 6000, id: 101, more: true}, false},
			{"its later fragment", false, frame{src: src, dst: a, proto: protoUDP, id: 101, fragOff: 3}, false},
			{"a later fragment of a datagram never seen", false, frame{src: src, dst: a, proto: protoUDP, id: 102, fragOff: 3}, false},
			{"a later fragment to a pod not isolated", false, frame{src: src, dst: b, proto: protoUDP, id: 103, fragOff: 3}, true},
		})
	}
	c, _ := p.Counters()
	if c.FragPass != 4 || c.FragDrop != 4 {
		t.Errorf("counters %+v: want 4 later fragments passed, 4 dropped", c)
	}
}

// TestIPv6ExtensionHeaders: the ports are found behind hop-by-hop, routing,
// destination options and AH headers; a chain longer than the programs
// walk cannot be classified and is dropped at an isolated pod; neighbour
// discovery always passes.
func TestIPv6ExtensionHeaders(t *testing.T) {
	p := testPlane(t)
	if _, err := p.Load(testRules()); err != nil {
		t.Fatal(err)
	}
	chain := []ext{opts6(nhHop, 1), routing6(), ah6(), opts6(nhDest, 2)}
	long := make([]ext, 9)
	for i := range long {
		long[i] = opts6(nhDest, 1)
	}
	checkVerdicts(t, p, []verdictCase{
		{"behind four headers, allowed port", false, frame{src: podB6, dst: podA6, proto: protoTCP, sport: 44000, dport: 80, exts: chain}, true},
		{"behind four headers, denied port", false, frame{src: podB6, dst: podA6, proto: protoTCP, sport: 44001, dport: 81, exts: chain}, false},
		{"behind headers and a first fragment", false, frame{src: netip.MustParseAddr("fd10:0:2::5"), dst: podA6, proto: protoUDP, sport: 7, dport: 5001, id: 7, more: true, exts: chain}, true},
		{"its later fragment behind headers", false, frame{src: netip.MustParseAddr("fd10:0:2::5"), dst: podA6, proto: protoUDP, id: 7, fragOff: 2, exts: chain}, true},
		{"nine headers at an isolated pod", false, frame{src: podB6, dst: podA6, proto: protoTCP, sport: 44002, dport: 80, exts: long}, false},
		{"nine headers at a pod not isolated", false, frame{src: podC6, dst: podB6, proto: protoTCP, sport: 44003, dport: 80, exts: long}, true},
		{"neighbour solicitation from an isolated pod", true, frame{src: podA6, dst: netip.MustParseAddr("ff02::1:ff00:2"), proto: protoICMP6, icmpType: 135}, true},
		{"neighbour advertisement to it", false, frame{src: podC6, dst: podA6, proto: protoICMP6, icmpType: 136}, true},
		{"an echo request to it (no rule allows pod-c)", false, frame{src: podC6, dst: podA6, proto: protoICMP6, icmpType: 128}, false},
	})
	c, _ := p.Counters()
	if c.Unparsed != 1 || c.NDP != 2 {
		t.Errorf("counters %+v: want 1 unparsed, 2 neighbour discovery", c)
	}
}

// TestKernelHZ: the tick rate measured is the kernel configuration's
// CONFIG_HZ, where the configuration can be read.
func TestKernelHZ(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (BPF)")
	}
	want := configHZ(t)
	got, err := kernelHZ()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("measured %v Hz; the kernel's configuration says CONFIG_HZ=%v", got, want)
	}
}

// configHZ is CONFIG_HZ from /proc/config.gz or /boot/config-RELEASE.
func configHZ(t *testing.T) float64 {
	var cfg []byte
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		if cfg, err = io.ReadAll(z); err != nil {
			t.Fatal(err)
		}
	} else {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			t.Fatal(err)
		}
		if cfg, err = os.ReadFile("/boot/config-" + unix.ByteSliceToString(u.Release[:])); err != nil {
			t.Skipf("no kernel configuration to compare with: %v", err)
		}
	}
	for _, l := range strings.Split(string(cfg), "\n") {
		if v, ok := strings.CutPrefix(l, "CONFIG_HZ="); ok {
			hz, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return hz
		}
	}
	t.Skip("the kernel's configuration gives no CONFIG_HZ")
	return 0
}

package labservice

import (
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"net/netip"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

func TestParseKey(t *testing.T) {
	good := map[string]Key{
		"10.96.0.100:5201":     {netip.MustParseAddr("10.96.0.100"), 5201, TCP},
		"10.96.0.100:5201/tcp": {netip.MustParseAddr("10.96.0.100"), 5201, TCP},
		"10.96.0.100:53/UDP":   {netip.MustParseAddr("10.96.0.100"), 53, UDP},
		"[fd00:10:96::100]:80": {netip.MustParseAddr("fd00:10:96::100"), 80, TCP},
		"[fd00::1]:53/udp":     {netip.MustParseAddr("fd00::1"), 53, UDP},
	}
	for in, want := range good {
		got, err := ParseKey(in)
		if err != nil || got != want {
			t.Errorf("ParseKey(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"10.96.0.300:5201":     "not an IPv4 or IPv6 address",
		"fd00::1:80":           "in brackets",
		"[fd00::1:80":          "no closing ]",
		"[fd00::1]80":          "want [ADDRESS]:PORT",
		"[fe80::1%eth0]:80":    "without a zone",
		"[::ffff:10.0.0.1]:80": "IPv4 addresses as IPv4",
		"[fe80::1]:80":         "not a unicast",
		"[::1]:80":             "not a unicast",
		"10.96.0.100":          "no port",
		"10.96.0.100:":         "empty port",
		"10.96.0.100:0":        "1 to 65535",
		"10.96.0.100:65536":    "1 to 65535",
		"10.96.0.100:http":     "1 to 65535",
		"10.96.0.100:80/sctp":  "unknown protocol",
		"0.0.0.0:80":           "not a unicast",
		"127.0.0.1:80":         "not a unicast",
		"224.0.0.1:80":         "not a unicast",
		"255.255.255.255:80":   "not a unicast",
		"svc.example.com:80/x": "unknown protocol",
	}
	for in, want := range bad {
		_, err := ParseKey(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseKey(%q) error %v, want one containing %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseKey(%q): error is not one line: %q", in, err)
		}
	}
}

func TestParseBackend(t *testing.T) {
	for in, want := range map[string]BackendSpec{
		"192.168.10.10:5201":  {"192.168.10.10", 5201},
		"pod-a:80":            {"pod-a", 80},
		"pod-a":               {"pod-a", 0},
		"192.168.10.10":       {"192.168.10.10", 0},
		"[fd00:10:244::a]:80": {"fd00:10:244::a", 80},
		"[fd00:10:244::a]":    {"fd00:10:244::a", 0},
	} {
		got, err := ParseBackend(in)
		if err != nil || got != want {
			t.Errorf("ParseBackend(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"192.168.10.300:80", "pod-a:0", "pod-a:99999", ":80", "192.168.10.10:", "fd00::a:80", "fd00:10:244::a", "[fd00::g]:80", "[]:80", "pod\na:80", "Pod-A"} {
		if _, err := ParseBackend(in); err == nil {
			t.Errorf("ParseBackend(%q) accepted", in)
		}
	}
}

func testState() *lab.State {
	return &lab.State{Name: "sv-unit", Mode: "veth-routed", Gateway: "169.254.10.24",
		Spec:  lab.Spec{PodCIDR: "192.168.10.0/24"},
		Nodes: []lab.NodeState{{Name: "node", NS: "vnl-sv-unit-node", IP: "10.10.0.11"}},
		Pods: []lab.PodState{{Name: "pod-a", NS: "vnl-sv-unit-pod-a", IP: "192.168.10.10", Ifname: "eth0", Node: "node"},
			{Name: "pod-b", NS: "vnl-sv-unit-pod-b", IP: "192.168.10.11", Ifname: "eth0", Node: "node"}}}
}

func TestConfigRules(t *testing.T) {
	st := testState()
	c := &Config{}
	be, err := Resolve(st, []BackendSpec{{Host: "pod-a"}, {Host: "192.168.10.11", Port: 8080}}, Key{VIP: netip.MustParseAddr(vip), Port: 80})
	if err != nil {
		t.Fatal(err)
	}
	if be[0].Port != 80 || be[0].Pod != "pod-a" || be[1].Pod != "pod-b" || be[1].Port != 8080 {
		t.Errorf("resolved backends %+v", be)
	}
	s := Service{VIP: netip.MustParseAddr("10.96.0.1"), Port: 80, Proto: TCP, Backends: be}
	if err := c.Add(s); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(s); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("duplicate service: %v", err)
	}
	if err := c.Del(Key{s.VIP, 80, UDP}); err == nil || !strings.Contains(err.Error(), "10.96.0.1:80/tcp") {
		t.Errorf("deleting the udp twin of a tcp service should name the tcp one: %v", err)
	}
	for _, b := range []BackendSpec{{Host: "8.8.8.8"}, {Host: "pod-z"}} {
		if _, err := Resolve(st, []BackendSpec{b}, Key{VIP: netip.MustParseAddr(vip), Port: 80}); err == nil || !strings.Contains(err.Error(), "not a pod of lab") {
			t.Errorf("backend %s outside the lab: %v", b.Host, err)
		}
	}
	if _, err := Resolve(st, []BackendSpec{{Host: "pod-a"}, {Host: "192.168.10.10"}}, Key{VIP: netip.MustParseAddr(vip), Port: 80}); err == nil {
		t.Error("the same backend twice was accepted")
	}
	if _, err := Resolve(st, nil, Key{VIP: netip.MustParseAddr(vip), Port: 80}); err == nil {
		t.Error("a service without backends was accepted")
	}
	for vip, want := range map[string]string{"192.168.10.50": "inside the pod network", "10.97.0.5": "reserved", "10.10.0.11": "node", "169.254.10.24": "gateway"} {
		if err := CheckVIP(st, netip.MustParseAddr(vip)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckVIP(%s) = %v, want %q", vip, err, want)
		}
	}
	c.Extra = MaxExtra + 1
	if err := c.Validate(st); err == nil {
		t.Error("Validate accepted too many extra services")
	}
	c.Extra = 0
	// A Service without backends: only the ebpf provider keeps one (its
	// programs refuse the clients); the netfilter providers have no rule for it.
	empty := &Config{Services: []Service{{VIP: netip.MustParseAddr("10.96.0.2"), Port: 80, Proto: TCP}}}
	for p, ok := range map[string]bool{"ebpf": true, "iptables": false, "nftables": false} {
		empty.Provider = p
		if err := empty.Validate(st); (err == nil) != ok {
			t.Errorf("provider %s, a Service without backends: %v (want accepted %v)", p, err, ok)
		}
	}
	// Clone is deep: changing the copy leaves the original.
	old := c.Clone()
	c.Services[0].Backends[0].Port = 1
	if old.Services[0].Backends[0].Port != 80 {
		t.Error("Clone shares backends")
	}
}

func TestGeneratedAreDistinct(t *testing.T) {
	last := map[family.Family]string{family.IPv4: "10.97.255.254", family.IPv6: "fd00:10:97::fffe"}
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		vips, backends := GeneratedRanges(f)
		seen := map[Key]bool{}
		for i := 0; i < 20000; i++ {
			s := Generated(f, i)
			if seen[s.Key()] {
				t.Fatalf("%s: generated service %d repeats %s", f, i, s)
			}
			seen[s.Key()] = true
		}
		for _, i := range []int{0, 1, 65533, 65534, MaxExtra - 1} {
			s := Generated(f, i)
			if !vips.Contains(s.VIP) || s.VIP == vips.Addr() || len(s.Backends) != GeneratedBackends {
				t.Errorf("%s: generated %d = %v, want a clusterIP in %s", f, i, s, vips)
			}
			for _, b := range s.Backends {
				if !backends.Contains(b.IP) || family.Of(b.IP) != f {
					t.Errorf("%s: generated %d: backend %s outside %s", f, i, b, backends)
				}
			}
		}
		if got := Generated(f, MaxExtra-1).VIP; got != netip.MustParseAddr(last[f]) {
			t.Errorf("%s: last generated clusterIP %s, want %s (the range's last but one)", f, got, last[f])
		}
	}
}

// The rules follow kube-proxy's shape: the probabilities split three
// backends evenly, hairpin and outside traffic are marked for masquerade.
func TestIptablesShape(t *testing.T) {
	st := testState()
	be := []Backend{{IP: netip.MustParseAddr("192.168.10.10"), Port: 80}, {IP: netip.MustParseAddr("192.168.10.11"), Port: 80}, {IP: netip.MustParseAddr("192.168.10.12"), Port: 80}}
	s := Service{VIP: netip.MustParseAddr("10.96.0.1"), Port: 80, Proto: TCP, Backends: be}
	w := iptablesWriter{podCIDR: st.Spec.PodCIDR, comments: true, f: nfIPv4}
	chains := w.serviceChains([]Service{s})
	for _, want := range []string{
		"-m statistic --mode random --probability 0.33333333333 -j KUBE-SEP-",
		"-m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-",
		"! -s 192.168.10.0/24 -d 10.96.0.1/32 -p tcp",
		"-s 192.168.10.10/32 -m comment --comment \"vnetlab/10.96.0.1:80\" -j KUBE-MARK-MASQ",
		"-j DNAT --to-destination 192.168.10.12:80",
	} {
		if !strings.Contains(chains, want) {
			t.Errorf("service chains lack %q:\n%s", want, chains)
		}
	}
	if n := strings.Count(chains, "--probability"); n != 2 {
		t.Errorf("%d statistic rules for 3 backends, want 2 (the last takes the rest)", n)
	}
	d := w.dispatch([]Service{s}, nil, nil)
	if !strings.Contains(d, "-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m comment --comment \"vnetlab/10.96.0.1:80 cluster IP\" -m tcp --dport 80 -j "+svcChain(s)) {
		t.Errorf("dispatch rule:\n%s", d)
	}
	// Changing the backends changes the service chain, not the endpoint chains.
	s2 := s
	s2.Backends = be[:2]
	if svcChain(s2) == svcChain(s) || sepChain(s2, be[0]) != sepChain(s, be[0]) {
		t.Error("chain names do not follow the backends as documented")
	}
	if len(svcChain(s)) > 28 {
		t.Errorf("chain name %s is longer than iptables' 28 characters", svcChain(s))
	}
}

func TestNftShape(t *testing.T) {
	st := testState()
	be := []Backend{{IP: netip.MustParseAddr("192.168.10.10"), Port: 80}, {IP: netip.MustParseAddr("192.168.10.11"), Port: 80}}
	multi := Service{VIP: netip.MustParseAddr("10.96.0.1"), Port: 80, Proto: UDP, Backends: be}
	single := Service{VIP: netip.MustParseAddr("10.96.0.2"), Port: 80, Proto: TCP, Backends: be[:1]}
	w := nftWriter{podCIDR: st.Spec.PodCIDR, f: nfIPv4}
	out := w.base() + w.serviceChains([]Service{multi, single}, nil) + w.elements("add", []Service{multi, single})
	for _, want := range []string{
		"rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips",
		"numgen random mod 2 vmap { 0 : goto endpoint-",
		"meta l4proto udp dnat to 192.168.10.11:80",
		"10.96.0.1 . udp . 80 : goto " + nftSvcChain(multi),
		"add rule ip kube-proxy " + nftSvcChain(single) + " goto " + nftEndpointChain(single, be[0]),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("nft script lacks %q", want)
		}
	}
	// An endpoint chain is created before the rule jumping to it.
	ec := "add chain ip kube-proxy " + nftEndpointChain(multi, be[1])
	if i, j := strings.Index(out, ec), strings.Index(out, "goto "+nftEndpointChain(multi, be[1])); i < 0 || j < i {
		t.Error("endpoint chain is referenced before it is created")
	}
}

// mode resolves a mode name, as the edges (flags, scenarios, a lab's state) do.
func mode(t *testing.T, name string) modes.Mode {
	t.Helper()
	m, err := modes.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCaveat(t *testing.T) {
	bridge := mode(t, "bridge")
	if Caveat("iptables", bridge, map[string]string{"bridge_nf_call_iptables": "off"}) == "" ||
		Caveat("nftables", bridge, map[string]string{"bridge_nf_call_iptables": "0"}) == "" {
		t.Error("no caveat for netfilter providers on a bridge with nf-call off")
	}
	if Caveat("iptables", bridge, nil) != "" || Caveat("ebpf", bridge, map[string]string{"bridge_nf_call_iptables": "off"}) != "" {
		t.Error("caveat where services work")
	}
	for _, p := range Names() {
		if err := Check(p, mode(t, "host")); err == nil {
			t.Errorf("provider %s accepts mode host, which has no pods", p)
		}
		if err := Check(p, mode(t, "veth-routed")); err != nil {
			t.Errorf("provider %s: %v", p, err)
		}
	}
}

// TestProvidersAskTheMode: what each provider accepts, and where eBPF
// programs go, follow the modes' descriptors (seed 002's table, plus the
// modes no packet-level provider is wired for yet).
func TestProvidersAskTheMode(t *testing.T) {
	for _, c := range []struct {
		mode                string
		netfilter, ebpf     bool
		placement           string
		ownsPrograms, podL2 bool
		defaultProvider     string
	}{
		{"veth-routed", true, true, PlacementNode, false, false, IPTables},
		{"bridge", true, true, PlacementNode, false, false, IPTables},
		{"docker-nat", true, true, PlacementNode, false, false, IPTables},
		{"macvlan", true, true, PlacementPod, false, false, IPTables},
		{"ipvlan", true, true, PlacementPod, false, false, IPTables},
		{"veth-ebpf", false, true, PlacementRouted, true, false, EBPF},
		{"macvlan-ebpf", false, true, PlacementPod, true, true, EBPF},
		{"ovs", false, false, PlacementNode, false, false, IPTables},
		{"vxlan", false, false, PlacementNode, false, false, IPTables},
		{"netkit", true, false, PlacementNode, false, false, IPTables},
	} {
		m := mode(t, c.mode)
		for _, p := range []string{"iptables", "nftables"} {
			if err := Check(p, m); (err == nil) != c.netfilter {
				t.Errorf("%s on %s: %v, want works=%v", p, c.mode, err, c.netfilter)
			}
		}
		if err := Check("ebpf", m); (err == nil) != c.ebpf {
			t.Errorf("ebpf on %s: %v, want works=%v", c.mode, err, c.ebpf)
		}
		if err := Check(EBPFSock, m); err != nil {
			t.Errorf("%s on %s: %v", EBPFSock, c.mode, err)
		}
		if got := PlacementFor(m); got != c.placement {
			t.Errorf("placement for %s: %s, want %s", c.mode, got, c.placement)
		}
		if got := m.OwnsDataPlane(); got != c.ownsPrograms {
			t.Errorf("%s owns its eBPF programs: %v, want %v", c.mode, got, c.ownsPrograms)
		}
		if got := m.Services.EBPF == modes.EBPFPodL2; got != c.podL2 {
			t.Errorf("%s attaches by MAC: %v, want %v", c.mode, got, c.podL2)
		}
		if got := DefaultProviderFor(m); got != c.defaultProvider {
			t.Errorf("default provider of %s: %s, want %s", c.mode, got, c.defaultProvider)
		}
	}
	if err := Check("iptables", mode(t, "ovs")); err == nil || !strings.Contains(err.Error(), "works with: bridge, docker-nat, ipvlan, macvlan, netkit, veth-routed") {
		t.Errorf("iptables on ovs: %v, want the modes it works with", err)
	}
}

// What each provider can do is its descriptor's to say: both eBPF
// providers keep a Service without backends (refusing its clients: ICMP
// port unreachable, or EPERM at connect()), only ebpf's programs sit on
// the pods (endpoints), and a Service without backends is refused by a
// config of the netfilter providers.
func TestProviderInfo(t *testing.T) {
	for _, c := range []struct {
		name             string
		empty, endpoints bool
	}{{IPTables, false, false}, {NFTables, false, false}, {EBPF, true, true}, {EBPFSock, true, false}} {
		i, err := Describe(c.name)
		if err != nil || i.Name != c.name || i.Summary == "" || i.KeepsEmptyServices != c.empty || i.Endpoints != c.endpoints {
			t.Errorf("%s: %+v, %v; want keeps empty Services %v, endpoints %v", c.name, i, err, c.empty, c.endpoints)
		}
		empty := &Config{Provider: c.name, Services: []Service{{VIP: netip.MustParseAddr("10.96.0.9"), Port: 80, Proto: TCP}}}
		if err := empty.Validate(testState()); (err == nil) != c.empty {
			t.Errorf("%s: a Service without backends: %v, want accepted=%v", c.name, err, c.empty)
		}
	}
	if got := NameList(); got != "ebpf, ebpf-sock, iptables or nftables" {
		t.Errorf("NameList = %q", got)
	}
}

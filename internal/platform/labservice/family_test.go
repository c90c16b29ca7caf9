package labservice

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// dualState is testState as a dual-stack lab: pods with an address of each family.
func dualState() *lab.State {
	st := testState()
	st.Spec.Family, st.Spec.PodCIDR6, st.Gateway6 = family.Dual, lab.DefaultPodCIDR6, "fe80::1"
	st.Nodes[0].IP6 = "fd00:10:10::11"
	st.Pods[0].IP6, st.Pods[1].IP6 = "fd00:10:244::a", "fd00:10:244::b"
	return st
}

// A pod named as a backend stands for its address of the clusterIP's
// family; an address of the other family, or a lab without the
// clusterIP's family, is refused with one line.
func TestResolveByFamily(t *testing.T) {
	st := dualState()
	k6 := Key{VIP: netip.MustParseAddr(DefaultVIP6), Port: 80, Proto: TCP}
	be, err := Resolve(st, []BackendSpec{{Host: "pod-a"}, {Host: "fd00:10:244:0::b", Port: 8080}}, k6)
	if err != nil {
		t.Fatal(err)
	}
	if be[0].IP != netip.MustParseAddr("fd00:10:244::a") || be[0].Port != 80 || be[0].Pod != "pod-a" || be[1].IP != netip.MustParseAddr("fd00:10:244::b") || be[1].Pod != "pod-b" || be[1].Port != 8080 {
		t.Errorf("IPv6 backends %v", be)
	}
	k4 := Key{VIP: netip.MustParseAddr(DefaultVIP), Port: 80, Proto: TCP}
	if be, err := Resolve(st, []BackendSpec{{Host: "pod-a"}}, k4); err != nil || be[0].IP != netip.MustParseAddr("192.168.10.10") {
		t.Errorf("IPv4 backend of a dual lab: %v, %v", be, err)
	}
	for _, c := range []struct {
		host string
		k    Key
		want string
	}{
		{"192.168.10.10", k6, "is ipv4 but clusterIP fd00:10:96::100 is ipv6"},
		{"fd00:10:244::a", k4, "is ipv6 but clusterIP 10.96.0.100 is ipv4"},
		{"fd00:10:244::99", k6, "not a pod of lab"},
	} {
		if _, err := Resolve(st, []BackendSpec{{Host: c.host}}, c.k); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Resolve(%s for %s) = %v, want %q", c.host, c.k, err, c.want)
		}
	}
	if k, err := ParseKey(k6.String()); err != nil || k != k6 || k6.String() != "[fd00:10:96::100]:80/tcp" {
		t.Errorf("an IPv6 key as svc ls prints it, %q, does not read back: %v, %v", k6, k, err)
	}
	if _, err := Resolve(testState(), []BackendSpec{{Host: "pod-a"}}, k6); err == nil || !strings.Contains(err.Error(), "has no ipv6 address") {
		t.Errorf("pod without an IPv6 address behind an IPv6 clusterIP: %v", err)
	}
	// The clusterIP's family must be one of the lab's (the one-line error a
	// Service of the wrong family gets), and IPv6 ones must not shadow the lab.
	v4 := testState()
	v6 := dualState()
	v6.Spec.Family = family.IPv6
	routedGW := dualState() // a gateway that is not link-local (bridge modes' ::1)
	routedGW.Gateway6 = "fd00:10:1::1"
	for _, c := range []struct {
		st   *lab.State
		vip  string
		want string
	}{
		{v4, DefaultVIP6, "clusterIP fd00:10:96::100 is ipv6 but lab sv-unit is ipv4: use an ipv4 clusterIP, or a lab with --ip-family ipv6 or dual"},
		{v6, DefaultVIP, "clusterIP 10.96.0.100 is ipv4 but lab sv-unit is ipv6: use an ipv6 clusterIP, or a lab with --ip-family ipv4 or dual"},
		{st, "fd00:10:244::99", "inside the pod network fd00:10:244::/64"},
		{st, "fd00:10:10::11", "node node's address"},
		{routedGW, "fd00:10:1::1", "gateway"},
		{st, "fd00:10:98::7", "in fd00:10:97::/112/fd00:10:98::/112, reserved for --extra-services"},
	} {
		err := CheckVIP(c.st, netip.MustParseAddr(c.vip))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckVIP(%s) = %v, want one line with %q", c.vip, err, c.want)
		}
	}
	if err := CheckVIP(st, netip.MustParseAddr(DefaultVIP6)); err != nil {
		t.Errorf("the default IPv6 clusterIP in a dual lab: %v", err)
	}
}

// The service path of a dual lab has both clusterIPs, each to the server
// pod's address of its family; generated services come in both families.
func TestEngineServicesDual(t *testing.T) {
	st := dualState()
	c, err := NewConfig(st, IPTables, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	fams := map[family.Family]int{}
	for _, s := range c.Services {
		f := family.Of(s.VIP)
		fams[f]++
		if family.Of(s.Backends[0].IP) != f {
			t.Errorf("service %s has backend %s of the other family", s, s.Backends[0])
		}
	}
	if fams[family.IPv4] != 2*len(EnginePorts) || fams[family.IPv6] != 2*len(EnginePorts) {
		t.Errorf("dual lab's service path: %v services per family, want %d of each", fams, 2*len(EnginePorts))
	}
	g, err := NewConfig(st, IPTables, 10, nil)
	if err != nil {
		t.Fatalf("generated services in a dual lab: %v", err)
	}
	gen := map[family.Family]int{}
	for _, s := range g.All()[:g.Count()-len(g.Services)] {
		gen[family.Of(s.VIP)]++
	}
	if gen[family.IPv4] != 10 || gen[family.IPv6] != 10 || g.Count() != len(g.Services)+20 {
		t.Errorf("dual lab with 10 extra services: %v generated, count %d; want 10 of each family", gen, g.Count())
	}
	g.Family = family.IPv4
	if err := g.Validate(st); err == nil || !strings.Contains(err.Error(), "set ip_family dual") {
		t.Errorf("generated services for the wrong family: %v", err)
	}
}

// Providers with Info.IPv6 serve labs with IPv6; the others keep the one-line refusal.
func TestCheckFamilyByProvider(t *testing.T) {
	for _, p := range Names() {
		i, _ := Describe(p)
		for _, f := range []family.Family{family.IPv6, family.Dual} {
			if err := CheckFamily(p, f); i.IPv6 != (err == nil) {
				t.Errorf("provider %s (IPv6 %v) in an %s lab: %v", p, i.IPv6, f, err)
			}
		}
		if CheckFamily(p, family.IPv4) != nil {
			t.Errorf("provider %s refuses an ipv4 lab", p)
		}
	}
	for p, want := range map[string]bool{EBPF: true, IPTables: true, NFTables: true, EBPFSock: true} {
		if i, _ := Describe(p); i.IPv6 != want {
			t.Errorf("%s says IPv6 Services %v, want %v", p, i.IPv6, want)
		}
	}
}

// The IPv6 rules are the IPv4 ones with the family's words: ip6 tables,
// /128 host matches, bracketed DNAT targets, the IPv6 pod network.
func TestNetfilterShape6(t *testing.T) {
	st := dualState()
	be := []Backend{{IP: netip.MustParseAddr("fd00:10:244::a"), Port: 80}, {IP: netip.MustParseAddr("fd00:10:244::b"), Port: 80}}
	s := Service{VIP: netip.MustParseAddr(DefaultVIP6), Port: 80, Proto: TCP, Backends: be}
	iw := newIptablesWriter(st, &Config{Services: []Service{s}}, nfIPv6)
	ipt := iw.serviceChains([]Service{s}) + iw.dispatch([]Service{s}, nil, nil)
	nw := nftWriter{podCIDR: nfIPv6.podCIDR(st), f: nfIPv6}
	nft := nw.base() + nw.serviceChains([]Service{s}, nil) + nw.elements("add", []Service{s})
	for out, wants := range map[string][]string{
		ipt: {
			"! -s fd00:10:244::/64 -d fd00:10:96::100/128 -p tcp",
			"-s fd00:10:244::a/128 -m comment",
			"-j DNAT --to-destination [fd00:10:244::b]:80",
			"-A KUBE-SERVICES -d fd00:10:96::100/128 -p tcp",
			"--probability 0.50000000000",
		},
		nft: {
			"add table ip6 kube-proxy",
			"type ipv6_addr . inet_proto . inet_service : verdict",
			"rule ip6 kube-proxy services ip6 daddr . meta l4proto . th dport vmap @service-ips",
			"ip6 saddr fd00:10:244::a jump mark-for-masquerade",
			"ip6 daddr fd00:10:96::100 tcp dport 80 ip6 saddr != fd00:10:244::/64 jump mark-for-masquerade",
			"meta l4proto tcp dnat to [fd00:10:244::b]:80",
			"add element ip6 kube-proxy service-ips { fd00:10:96::100 . tcp . 80 : goto ",
		},
	} {
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("IPv6 rules lack %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "/32") || strings.Contains(out, " ip daddr") || strings.Contains(out, "192.168.") {
			t.Errorf("IPv6 rules hold IPv4 words:\n%s", out)
		}
	}
	if got := nfIPv4.of([]Service{s, {VIP: netip.MustParseAddr(DefaultVIP)}}); len(got) != 1 || got[0].VIP.Is6() {
		t.Errorf("IPv4 rules of a dual config: %v", got)
	}
}

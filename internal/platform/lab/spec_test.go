package lab

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

func TestPodNames(t *testing.T) {
	for i, want := range map[int]string{0: "pod-a", 1: "pod-b", 25: "pod-z", 26: "pod-aa", 27: "pod-ab", 199: "pod-gr"} {
		if got := PodName(i); got != want {
			t.Errorf("PodName(%d) = %s, want %s", i, got, want)
		}
	}
}

func TestDefaultPodSpecs(t *testing.T) {
	p, err := DefaultPodSpecs(2, DefaultPodCIDR, 1)
	if err != nil || p[0] != (PodSpec{Name: "pod-a", IP: "192.168.10.10"}) || p[1] != (PodSpec{Name: "pod-b", IP: "192.168.10.11"}) {
		t.Fatalf("seed 002 defaults: %v %v", p, err)
	}
	// Two nodes: each node's share is a /25; pods alternate.
	p, err = DefaultPodSpecs(3, DefaultPodCIDR, 2)
	if err != nil || p[0].IP != "192.168.10.10" || p[1].IP != "192.168.10.138" || p[2].IP != "192.168.10.11" {
		t.Fatalf("two nodes: %v %v", p, err)
	}
	if _, err := DefaultPodSpecs(245, DefaultPodCIDR, 1); err != nil {
		t.Errorf("245 pods (.10-.254) fit a /24: %v", err)
	}
	if _, err := DefaultPodSpecs(246, DefaultPodCIDR, 1); err == nil {
		t.Error("246 pods do not fit a /24")
	}
}

func TestSplitNet(t *testing.T) {
	_, n, _ := net.ParseCIDR("192.168.10.0/24")
	parts := splitNet(n, 2)
	if parts[0].String() != "192.168.10.0/25" || parts[1].String() != "192.168.10.128/25" {
		t.Errorf("split: %v", parts)
	}
	if splitNet(n, 1)[0] != n {
		t.Error("one part is the network itself")
	}
}

func TestValidateRejects(t *testing.T) {
	base := func() Spec {
		p, _ := DefaultPodSpecs(2, DefaultPodCIDR, 1)
		return Spec{Name: "ok", Mode: "bridge", Pods: p, PodCIDR: DefaultPodCIDR}
	}
	cases := []struct {
		mut  func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Name = "Bad_Name" }, "use lower-case letters"},
		{func(s *Spec) { s.Name = "sixteen-chars-xx" }, "is 16 characters; the limit is 15"},
		{func(s *Spec) { s.Pods[1].IP = s.Pods[0].IP }, "address clash: pods pod-a and pod-b"},
		{func(s *Spec) { s.Pods[0].IP = "192.168.10.1" }, "the pods' gateway address"},
		{func(s *Spec) { s.Pods[0].IP = "10.1.1.1" }, "outside pod_cidr"},
		{func(s *Spec) { s.Pods[0].IP = "192.168.10.255" }, "network or broadcast"},
		{func(s *Spec) { s.Pods[1].Name = "pod-a" }, `pod name "pod-a" is used twice`},
		{func(s *Spec) { s.Pods[1].Name = "node" }, "reserved"},
		{func(s *Spec) { s.Pods = s.Pods[:1] }, "needs at least 2 pods"},
		{func(s *Spec) { s.PodCIDR = "nope" }, "is not an IPv4 CIDR"},
		{func(s *Spec) { s.Mode = "ovs-kernel-x" }, "unknown mode"},
	}
	for _, c := range cases {
		s := base()
		c.mut(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
}

// A Linux bridge holds 1024 ports: more pods than that are refused by
// Validate, before Up builds anything, with the reason and what to do.
func TestValidateBridgePortLimit(t *testing.T) {
	spec := func(mode string, pods, nodes int, opts map[string]string) Spec {
		p, err := DefaultPodSpecs(pods, "10.128.0.0/16", nodes)
		if err != nil {
			t.Fatal(err)
		}
		return Spec{Name: "ok", Mode: mode, Pods: p, PodCIDR: "10.128.0.0/16", Nodes: nodes, Options: opts}
	}
	refused := []struct {
		spec Spec
		want string
	}{
		{spec("bridge", 1025, 1, nil), "mode bridge holds at most 1024 pods here, not 1025: each pod is a port of the Linux bridge br0"},
		{spec("docker-nat", 1025, 1, nil), "at most 1024 pods"},
		{spec("bridge", 2047, 2, nil), "at most 2046 pods here, not 2047"}, // each node's br0 holds eth1 too
		{spec("host-gw", 2049, 2, nil), "at most 2048 pods"},
		{spec("ovs", 1024, 1, map[string]string{"linux_bridge": "on"}), "at most 1023 pods"},
	}
	for _, c := range refused {
		err := c.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "use --pods") {
			t.Errorf("%s, %d pods, %d nodes: want %q and what to do, got %v", c.spec.Mode, len(c.spec.Pods), c.spec.NodeCount(), c.want, err)
		}
	}
	for _, s := range []Spec{spec("bridge", 1024, 1, nil), spec("bridge", 2046, 2, nil), spec("veth-routed", 5000, 1, nil), spec("ovs", 1024, 1, nil)} {
		m, _ := modes.Get(s.Mode)
		if err := m.CheckPodCount(len(s.Pods), s.NodeCount(), s.Options); err != nil {
			t.Errorf("%s, %d pods, %d nodes: refused: %v", s.Mode, len(s.Pods), s.NodeCount(), err)
		}
	}
	// Up refuses before it reserves anything: no state directory.
	s := spec("bridge", 1025, 1, nil)
	s.Name = "e2portlimit"
	if _, err := Up(context.Background(), s, nil); err == nil {
		t.Fatal("Up built 1025 pods on one bridge")
	}
	if _, err := os.Stat(labDir(s.Name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused lab left its state directory: %v", err)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]uint64{"10gbit": 10e9, "500mbit": 500e6, "100kbit": 100e3, "1e9": 1e9} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%s) = %d, %v", in, got, err)
		}
	}
	if _, err := ParseRate("fast"); err == nil {
		t.Error("fast is not a rate")
	}
}

// Pods get an address of each of the lab's families: IPv4 from .10 of
// pod_cidr, IPv6 from ::a of pod_cidr6, split between nodes as IPv4 is.
func TestPodsFor(t *testing.T) {
	p, err := PodsFor(2, Spec{Family: family.Dual})
	if err != nil || p[0] != (PodSpec{Name: "pod-a", IP: "192.168.10.10", IP6: "fd00:10:244::a"}) || p[1].IP6 != "fd00:10:244::b" {
		t.Fatalf("dual: %v %v", p, err)
	}
	p, err = PodsFor(3, Spec{Family: family.IPv6, Nodes: 2})
	if err != nil || p[0].IP != "" || p[0].IP6 != "fd00:10:244::a" || p[1].IP6 != "fd00:10:244:0:8000::a" || p[2].IP6 != "fd00:10:244::b" {
		t.Fatalf("ipv6, two nodes: %v %v", p, err)
	}
	if p, err = PodsFor(2, Spec{}); err != nil || p[0].IP6 != "" || p[0].IP != "192.168.10.10" {
		t.Fatalf("no family is ipv4: %v %v", p, err)
	}
	if _, err := PodsFor(300, Spec{Family: family.IPv6, PodCIDR6: "fd00:1::/120"}); err == nil {
		t.Error("300 pods fit a /120")
	}
	_, n, _ := net.ParseCIDR("fd00:10:244::/48")
	if parts := splitNet(n, 2); parts[1].String() != "fd00:10:244:8000::/49" {
		t.Errorf("split of a /48: %v", parts)
	}
}

// Bad IP family input: one line naming the problem and the fix, before
// anything is built.
func TestValidateFamilyRejects(t *testing.T) {
	dual := func() Spec {
		p, _ := PodsFor(2, Spec{Family: family.Dual})
		return Spec{Name: "ok", Mode: "veth-routed", Pods: p, Family: family.Dual}
	}
	v4 := func() Spec {
		p, _ := PodsFor(2, Spec{})
		return Spec{Name: "ok", Mode: "veth-routed", Pods: p}
	}
	cases := []struct {
		base func() Spec
		mut  func(*Spec)
		want string
	}{
		{v4, func(s *Spec) { s.PodCIDR = "fd00:1::/64" }, "--pod-cidr fd00:1::/64 is an IPv6 network: give it as --pod-cidr6, with --ip-family ipv6 or dual"},
		{v4, func(s *Spec) { s.PodCIDR6 = "fd00:1::/64" }, "--pod-cidr6 fd00:1::/64 is for IPv6 pods: add --ip-family ipv6 or dual"},
		{v4, func(s *Spec) { s.Pods[0].IP6 = "fd00:10:244::a" }, "in an IPv4 lab: add --ip-family dual or ipv6"},
		{v4, func(s *Spec) { s.Family = "ipv5" }, "--ip-family \"ipv5\" is not a family"},
		{dual, func(s *Spec) { s.PodCIDR6 = "192.168.0.0/16" }, "--pod-cidr6 \"192.168.0.0/16\" is not an IPv6 CIDR"},
		{dual, func(s *Spec) { s.PodCIDR6 = "fd00:10:244::/124" }, "--pod-cidr6 fd00:10:244::/124 is too small (a /124): use a /120 or shorter prefix"},
		{dual, func(s *Spec) { s.PodCIDR6 = "fd00:10::/32" }, "address clash: --pod-cidr6 fd00:10::/32 overlaps vnetlab's node network fd00:10:10::/64"},
		{dual, func(s *Spec) { s.Pods[1].IP6 = s.Pods[0].IP6 }, "address clash: pods pod-a and pod-b both have fd00:10:244::a"},
		{dual, func(s *Spec) { s.Pods[0].IP6 = "fd00:10:244::1" }, "the pods' gateway address"},
		{dual, func(s *Spec) { s.Pods[0].IP6 = "fd00:9::1" }, "outside pod_cidr6"},
		{dual, func(s *Spec) { s.Pods[0].IP6 = "" }, "is not an IPv6 address"},
		{dual, func(s *Spec) { s.Family = family.IPv6 }, "has the IPv4 address 192.168.10.10 in an IPv6-only lab: use --ip-family dual"},
	}
	for _, c := range cases {
		s := c.base()
		c.mut(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
	// A mode without IPv6: every one of vnetlab's has it, a new one may not.
	if err := dual().CheckFamily(modes.Mode{Name: "v4-only"}); err == nil || !strings.Contains(err.Error(), "mode v4-only carries IPv4 only: use --ip-family ipv4, or a mode with IPv6 (") {
		t.Errorf("an IPv4-only mode in a dual lab: %v", err)
	}
	for _, s := range []Spec{dual(), v4()} {
		if err := s.Validate(); err != nil {
			t.Errorf("%s lab refused: %v", s.Family, err)
		}
	}
}

package modes_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Every mode that says it wires IPv6 does, in both IPv6 families: pods
// reach each other and their node over each family they have, dual-stack
// pods hold both addresses and IPv6-only pods no IPv4 one. A mode the
// kernel lacks is skipped (doctor says why).
func TestIPv6Modes(t *testing.T) {
	for i, name := range modes.IPv6Modes() {
		m, _ := modes.Get(name)
		if err := modes.Available(m); err != nil {
			if kernel.GuestHas(name) {
				t.Errorf("%s: the stock-kernel guest has it, yet: %v", name, err)
			}
			t.Logf("%s: skipped: %v", name, err)
			continue
		}
		for _, fam := range []family.Family{family.IPv6, family.Dual} {
			t.Run(name+"/"+string(fam), func(t *testing.T) {
				nodes := max(m.MinNodes, 1)
				l := upFamilyLab(t, fmt.Sprintf("fam%d%s", i, fam[:1]), name, fam, nodes, nil)
				checkFamilies(t, l, fam)
				if m.Services.EBPF == modes.EBPFHostRouting {
					checkHostRouted6(t, l)
				}
			})
		}
		if m.CrossHost && m.MinNodes < 2 { // and across two nodes, over the underlay's IPv6
			t.Run(name+"/dual/2-nodes", func(t *testing.T) {
				l := upFamilyLab(t, fmt.Sprintf("fam%dx", i), name, family.Dual, 2, nil)
				checkFamilies(t, l, family.Dual)
			})
		}
		if name == modes.Ipvlan { // l3: the parent routes the children, NDP included
			t.Run(name+"/l3/dual", func(t *testing.T) {
				l := upFamilyLab(t, fmt.Sprintf("fam%dl", i), name, family.Dual, 1, map[string]string{"ipvlan_mode": "l3"})
				checkFamilies(t, l, family.Dual)
			})
		}
	}
}

// upFamilyLab builds a two-pod lab of family fam and removes it when the
// test ends, pass or fail.
func upFamilyLab(t *testing.T, name, mode string, fam family.Family, nodes int, opts map[string]string) *lab.Lab {
	t.Helper()
	spec := lab.Spec{Name: name, Mode: mode, Family: fam, Nodes: nodes, Options: opts}
	pods, err := lab.PodsFor(2, spec)
	if err != nil {
		t.Fatal(err)
	}
	spec.Pods = pods
	_ = lab.Down(name, nil)
	l, err := lab.Up(context.Background(), spec, nil)
	if err != nil {
		t.Fatalf("up %s %s: %v", mode, fam, err)
	}
	t.Cleanup(func() {
		l.Release()
		if _, err := os.Stat(filepath.Join(lab.StateRoot, "labs", name)); err == nil {
			_ = lab.Down(name, nil)
		}
	})
	return l
}

// checkFamilies: the path's client reaches its server, and each pod its
// node, over every family of the lab; pods hold exactly their families'
// global addresses.
func checkFamilies(t *testing.T, l *lab.Lab, fam family.Family) {
	t.Helper()
	st := l.State
	ep, ok := st.Paths["pod"]
	if !ok {
		t.Fatalf("no pod path: %v", st.Paths)
	}
	for _, f := range fam.Measured() {
		if ep.Addr(f) == "" {
			t.Fatalf("pod path has no %s address: %+v", f, ep)
		}
		ping(t, ep.ClientNS, ep.Addr(f))
	}
	if fam == family.Dual && st.Gateway != "" && st.Gateway6 == "" {
		t.Errorf("the lab says its IPv4 gateway (%s) but not its IPv6 one", st.Gateway)
	}
	if !fam.HasIPv4() && ep.Target != "" {
		t.Errorf("an IPv6 lab's path has an IPv4 target %s", ep.Target)
	}
	for _, p := range st.Pods {
		node := nodeOf(st, p.Node)
		if fam.HasIPv6() {
			ping(t, p.NS, node.IP6)
		}
		if fam.HasIPv4() {
			ping(t, p.NS, node.IP)
		}
		v4, v6 := globalAddrs(t, p.NS, p.Ifname)
		if fam.HasIPv4() != (len(v4) == 1 && v4[0] == p.IP) || fam.HasIPv6() != (len(v6) == 1 && v6[0] == p.IP6) {
			t.Errorf("%s holds IPv4 %v and IPv6 %v; a %s pod should hold %q and %q", p.Name, v4, v6, fam, p.IP, p.IP6)
		}
	}
}

// checkHostRouted6: in a host-routing mode (veth-ebpf), IPv6 between two
// pods of one node is delivered by host6.h's bpf_redirect_peer, not by the
// node's stack: the plane's redirect counter rises with a ping.
func checkHostRouted6(t *testing.T, l *lab.Lab) {
	t.Helper()
	ep := l.State.Paths["pod"]
	plane, err := tcbpf.Open(l.State.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer plane.Close()
	before, err := plane.HostStats()
	if err != nil {
		t.Fatal(err)
	}
	ping(t, ep.ClientNS, ep.Addr(family.IPv6))
	after, err := plane.HostStats()
	if err != nil {
		t.Fatal(err)
	}
	// Echo request and reply, at least (the IPv4 side is quiet meanwhile).
	if after.Redirected-before.Redirected < 2 {
		t.Errorf("a ping to %s: %d packets redirected, want its request and reply (host stats %+v)", ep.Addr(family.IPv6), after.Redirected-before.Redirected, after)
	}
}

func nodeOf(st *lab.State, name string) lab.NodeState {
	for _, n := range st.Nodes {
		if n.Name == name {
			return n
		}
	}
	return st.Nodes[0]
}

// globalAddrs lists the global addresses of ifname in namespace ns.
func globalAddrs(t *testing.T, ns, ifname string) (v4, v6 []string) {
	t.Helper()
	err := nsutil.Do(ns, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return err
		}
		as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range as {
			switch {
			case a.IP.To4() != nil:
				v4 = append(v4, a.IP.String())
			case a.IP.IsGlobalUnicast() && !a.IP.IsLinkLocalUnicast():
				v6 = append(v6, a.IP.String())
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return v4, v6
}

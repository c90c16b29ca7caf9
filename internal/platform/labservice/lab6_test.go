package labservice

import (
	"context"
	"maps"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/system/rootns"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// IPv6 Services of the netfilter providers on a dual-stack and an
// IPv6-only lab, behind generated Services of each family the
// lab has (--extra-services): TCP and UDP through the IPv6 clusterIP (with
// the IPv4 one beside it in the dual lab), hairpin, a backend that refuses
// answered through the clusterIP, and the root namespace untouched while
// the lab serves and after it is gone.
func TestClusterIPv6Netfilter(t *testing.T) {
	requireRoot(t)
	for _, p := range NamesWhere(func(i Info) bool { return i.IPv6 && !i.Endpoints && !i.KeepsEmptyServices }) {
		for _, f := range []family.Family{family.Dual, family.IPv6} {
			t.Run(p+"/"+string(f), func(t *testing.T) { clusterIPv6(t, p, f) })
		}
	}
}

func clusterIPv6(t *testing.T, p string, f family.Family) {
	before := rootns.Snapshot()
	t.Cleanup(func() { // after the lab is down (cleanups run last first)
		if d := rootns.Diff(before, rootns.Snapshot()); d != "" {
			t.Errorf("the root namespace changed:\n%s", d)
		}
	})
	st := newSpecLab(t, lab.Spec{Name: "sv6-" + p[:3] + "-" + string(f)[:1], Mode: "veth-routed", PodCIDR: lab.DefaultPodCIDR, Family: f}, 2)
	const extra = 500
	c, err := Setup(st, p, extra, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Measured() {
		if last := Generated(g, extra-1).VIP.String(); !strings.Contains(ruleset(t, st.Nodes[0].NS, p, g), last) {
			t.Errorf("the node's %s rules lack the last generated %s Service's clusterIP %s", p, g, last)
		}
	}
	a, b := pod(st, "pod-a"), pod(st, "pod-b")
	if f.HasIPv4() {
		serve(t, a.NS, 5201)
	}
	testnet.Serve6(t, a.NS, 5201, "")
	vip6 := net.JoinHostPort(DefaultVIP6, "5201")
	if err := roundTrip(b.NS, "tcp6", net.JoinHostPort(a.IP6, "5201")); err != nil {
		t.Fatalf("pod IPv6 address (control): %v", err)
	}
	for _, network := range []string{"tcp6", "udp6"} {
		if err := roundTrip(b.NS, network, vip6); err != nil {
			t.Errorf("%s pod-b -> %s -> pod-a: %v", network, vip6, err)
		}
	}
	if f.HasIPv4() {
		for _, network := range []string{"tcp4", "udp4"} {
			if err := roundTrip(b.NS, network, vip+":5201"); err != nil {
				t.Errorf("%s beside the IPv6 Service, pod-b -> %s:5201 -> pod-a: %v", network, vip, err)
			}
		}
	}
	// Hairpin: pod-a's packet comes back to pod-a, so its source must be
	// masqueraded to the node, or pod-a would answer itself directly.
	if err := roundTrip(a.NS, "tcp6", vip6); err != nil {
		t.Errorf("hairpin pod-a -> %s -> pod-a: %v", vip6, err)
	}
	// A backend with nothing listening: the client is refused at once
	// (the backend's RST, or its ICMPv6 port unreachable, translated
	// back to the clusterIP by conntrack), as without a Service.
	old := c.Clone()
	for _, svc := range []string{"[" + DefaultVIP6 + "]:5202/tcp", "[" + DefaultVIP6 + "]:5202/udp"} {
		s, err := Spec{Service: svc, Backends: []string{"pod-a:5999"}}.Build(st)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	load(t, st, old, c)
	for _, network := range []string{"tcp6", "udp6"} {
		took, err := testnet.RefusedAfter(func(fn func() error) error { return nsutil.Do(b.NS, fn) }, network, net.JoinHostPort(DefaultVIP6, "5202"))
		if err != nil {
			t.Errorf("%s to a clusterIP whose backend listens on nothing: %v (want connection refused)", network, err)
		} else {
			t.Logf("%s: refused after %v", network, took.Round(time.Microsecond))
		}
	}
	// A Service without backends is refused (these providers have no
	// rule for it) with one line, as for IPv4.
	k, _ := ParseKey("[" + DefaultVIP6 + "]:5203/tcp")
	if _, err := Add(st.Name, AddRequest{Key: k}); err == nil || !strings.Contains(err.Error(), "needs at least one") {
		t.Errorf("IPv6 Service without backends: %v", err)
	}
	was, now := maps.Clone(before), rootns.Snapshot()
	for _, m := range []map[string]string{was, now} { // the lab's own namespaces are up
		delete(m, rootns.KeyNamespaces)
		delete(m, rootns.KeyNamespaceMounts)
	}
	if d := rootns.Diff(was, now); d != "" {
		t.Errorf("the root namespace changed while the lab serves:\n%s", d)
	}
}

// ruleset is netfilter provider p's rules of family f in namespace ns, as
// its save tool or nft prints them.
func ruleset(t *testing.T, ns, p string, f family.Family) string {
	t.Helper()
	nf := nfFor(f)
	args := []string{nf.save, "-t", "nat"}
	if p == NFTables {
		args = []string{"nft", "list", "table", nf.nft, NftTable}
	}
	out, err := proc.Command(context.Background(), ns, args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("%s in %s: %v", strings.Join(args, " "), ns, err)
	}
	return string(out)
}

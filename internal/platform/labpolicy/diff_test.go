package labpolicy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// The differential of the providers whose rules run in the node's
// netfilter (nftables, iptables), as polbpf's TestDifferential is the eBPF
// data plane's: random worlds (netpoltest) in one real lab (veth-routed,
// dual-stack, a pod for every address a world's pod can have), each
// world's compiled rules given to the provider as a lab's transaction gives
// them (Install, then Update from the world before), the node's conntrack
// emptied, and random probes sent as real packets between the world's pods
// and from and to addresses of no pod (the ext namespace sends and receives
// those), all of a world's at once (diffnet_test.go); a probe delivered
// must be one World.Allowed allows, and one it allows must be delivered
// (a provider that rejected would answer with an ICMP error, which is no
// delivery); the RST a pod answers an allowed TCP probe with must come
// back, as the reply of an allowed connection. A probe no lab can carry (an address that is no host's: unspecified,
// broadcast, multicast, the pods' own subnet's network or broadcast
// address) is left out and counted.
//
// VNETLAB_DIFF_WORLDS and VNETLAB_DIFF_PROBES (per world) scale it up;
// VNETLAB_DIFF_SEED is the first world's seed: a disagreement names the
// seed, and that seed with VNETLAB_DIFF_WORLDS=1 runs its world alone.
// The default run: well under a minute per provider.
const (
	diffWorlds = 30
	diffProbes = 200
	// The longest a world's probes are waited for; the first world's
	// packets also wait for the lab's neighbours to be resolved.
	diffWindow, firstWindow = 500 * time.Millisecond, 3 * time.Second
)

func TestDifferential(t *testing.T) {
	requireRoot(t)
	spec := lab.Spec{Name: "np-diff", Mode: modes.VethRouted, Family: family.Dual,
		PodCIDR: netpoltest.PodNet(false).String(), PodCIDR6: netpoltest.PodNet(true).String()}
	for i := range netpoltest.MaxPods {
		spec.Pods = append(spec.Pods, lab.PodSpec{Name: fmt.Sprintf("p%d", i),
			IP: netpoltest.PodAddr(i, false).String(), IP6: netpoltest.PodAddr(i, true).String()})
	}
	l, _ := testnet.UpLab(t, spec, 0)
	l.Release()
	st := l.State
	eps := []endpoint{{ns: st.Ext, ifname: st.Nodes[0].Name}} // the ext end of the node's uplink
	for _, p := range st.Pods {
		eps = append(eps, endpoint{ns: p.NS, ifname: p.Ifname, addrs: []netip.Addr{netip.MustParseAddr(p.IP), netip.MustParseAddr(p.IP6)}})
	}
	pr, err := newProber(eps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pr.close)
	for _, provider := range []string{NFTables, IPTables} {
		t.Run(provider, func(t *testing.T) { differential(t, st, pr, providerEnforcer(t, st, provider)) })
	}
	// The peer, with VNETLAB_DIFF_KUBEROUTER set (its program is built
	// on first use): kube-router's own controller on each world, IPv4 only
	// (its release's IPv6 sync cannot name its own IPv6 sets). Where it
	// decides otherwise than the model is reported, not failed: it is the
	// peer's verdict, for its users to know.
	if os.Getenv("VNETLAB_DIFF_KUBEROUTER") != "" {
		t.Run("kube-router", func(t *testing.T) { differential(t, st, pr, kubeRouterEnforcer(st)) })
	}
}

// enforcer is what the differential loads each world into.
type enforcer struct {
	name string
	// load enforces world g (its rules compiled: r) in the lab.
	load   func(g *netpoltest.Gen, r *netpol.Rules) error
	remove func() error
	// peer: a probe decided otherwise than the model is the peer's
	// verdict, logged with the model's, not a failure.
	peer bool
	// v4: only the worlds' IPv4 probes.
	v4 bool
}

// who names e in a verdict.
func (e enforcer) who() string {
	if e.peer {
		return e.name
	}
	return "the " + e.name + " provider"
}

// providerEnforcer is a lab provider: Install for the first world, Update
// from the world before for the others, as a lab's transaction gives them.
func providerEnforcer(t *testing.T, st *lab.State, provider string) enforcer {
	if provider == IPTables {
		if _, err := exec.LookPath("ipset"); err != nil {
			t.Skip("ipset not installed")
		}
	}
	p, err := Get(provider)
	if err != nil {
		t.Fatal(err)
	}
	var prev *netpol.Rules
	return enforcer{name: provider,
		load: func(_ *netpoltest.Gen, r *netpol.Rules) error {
			var err error
			if prev == nil {
				err = p.Install(st, r)
			} else {
				err = p.Update(st, prev, r, netpol.Diff(prev, r))
			}
			prev = r
			return err
		},
		remove: func() error {
			if prev == nil {
				return nil
			}
			prev = nil
			if err := p.Remove(st); err != nil {
				return err
			}
			inNodesOnly(t, st, provider, false)
			return nil
		}}
}

// kubeRouterEnforcer is kube-router's controller synced on each world in
// the lab's node (KubeRouterRules); an empty world at the end leaves none
// of the worlds' chains and sets.
func kubeRouterEnforcer(st *lab.State) enforcer {
	ns := st.Nodes[0].NS
	return enforcer{name: "kube-router", peer: true, v4: true,
		load: func(g *netpoltest.Gen, _ *netpol.Rules) error {
			return KubeRouterRules(context.Background(), ns, g.World, family.IPv4, func(string, ...any) {})
		},
		remove: func() error {
			return KubeRouterRules(context.Background(), ns, &netpol.World{}, family.IPv4, func(string, ...any) {})
		}}
}

// differential runs the worlds through enforcer e in lab st.
func differential(t *testing.T, st *lab.State, pr *prober, e enforcer) {
	worlds, probes, first := testnet.EnvInt("VNETLAB_DIFF_WORLDS", diffWorlds), testnet.EnvInt("VNETLAB_DIFF_PROBES", diffProbes), testnet.EnvInt("VNETLAB_DIFF_SEED", 1)
	start := time.Now()
	provider := e.name
	loaded := false
	t.Cleanup(func() {
		if loaded {
			if err := e.remove(); err != nil {
				t.Errorf("remove %s: %v", provider, err)
			}
		}
	})
	var n, allowed, replies, skipped, bad, neighbours, peerSaid, unsynced int
	kinds := map[string]int{}
	for seed := first; seed < first+worlds; seed++ {
		g := netpoltest.New(uint64(seed))
		if e.v4 && !g.Family.HasIPv4() {
			continue
		}
		r := netpol.Compile(g.World)
		loaded = true
		if err := e.load(g, &r); err != nil {
			if e.peer && errors.Is(err, ErrKubeRouterSync) {
				unsynced++
				t.Logf("seed %d: %s cannot enforce this world: %v", seed, provider, err)
				continue
			}
			t.Fatalf("seed %d: %s: %v\n%s", seed, provider, err, g)
		}
		forgetFlows(t, st)
		forgot, err := pr.forgetNeighbours()
		if err != nil {
			t.Fatal(err)
		}
		neighbours = max(neighbours, forgot)
		var sent []netpoltest.Probe
		var want []bool
		shown := false
		complain := func(i int, what string) {
			if e.peer {
				peerSaid++
				if !shown {
					t.Logf("seed %d: %s", seed, g)
					shown = true
				}
				t.Logf("seed %d: probe %v (%s): %s", seed, sent[i], sent[i].Kind(g.World), what)
				return
			}
			bad++
			t.Errorf("seed %d: probe %v: %s\n%s\nrun it alone: VNETLAB_DIFF_SEED=%d VNETLAB_DIFF_WORLDS=1 go test ./internal/platform/labpolicy -run 'TestDifferential/%s$'",
				seed, sent[i], what, g, seed, provider)
			if bad >= 5 {
				t.Fatalf("stopped at %d disagreements", bad)
			}
		}
		expect := 0
		for _, pb := range g.Probes(probes) {
			if e.v4 && !pb.Dst.Is4() {
				continue
			}
			if !deliverable(pb.Src) || !deliverable(pb.Dst) {
				skipped++
				continue
			}
			w := g.World.Allowed(pb.Src, pb.Dst, pb.Proto, pb.Port)
			sent, want = append(sent, pb), append(want, w)
			if w {
				expect++
			}
		}
		window := diffWindow
		if seed == first {
			window = firstWindow
		}
		got, answered, err := pr.run(uint16(seed-first+1), sent, expect+answers(pr, sent, want, nil), window)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		answers(pr, sent, want, func(i int) {
			replies++
			if got[i] && !answered[i] {
				complain(i, "allowed and delivered, but the RST its pod answered with was dropped (the model passes every reply of an allowed connection)")
			}
		})
		for i, pb := range sent {
			n++
			kinds[pb.Kind(g.World)]++
			if want[i] {
				allowed++
			}
			if got[i] != want[i] {
				complain(i, fmt.Sprintf("%s says %s (%s), the model %s", e.who(), netpoltest.Verdict(got[i]), map[bool]string{true: "delivered", false: "not delivered"}[got[i]], netpoltest.Verdict(want[i])))
			}
		}
	}
	t.Logf("%s: %d worlds from seed %d, %d probes (%d allowed, %d denied; %v; %d left out; %d answers of a pod checked), %d disagreements, in %v; at most %d neighbours of no pod a world left in the pods",
		provider, worlds, first, n, allowed, n-allowed, kinds, skipped, replies, bad, time.Since(start).Round(time.Millisecond), neighbours)
	if e.peer {
		t.Logf("%s decided %d of the probes otherwise than the model (each logged above); %d worlds it could not sync", provider, peerSaid, unsynced)
	}
	if n >= 1000 && (allowed < n/10 || n-allowed < n/10 || len(kinds) < 3) {
		t.Errorf("the probes hardly test anything: %d allowed, %d denied, %v", allowed, n-allowed, kinds)
	}
	loaded = false
	if err := e.remove(); err != nil {
		t.Fatal(err)
	}
}

// deliverable says whether the lab can carry a packet from or to address
// a: a unicast address, not the network or broadcast address of the pods'
// IPv4 subnet (a pod sends to those as broadcasts).
func deliverable(a netip.Addr) bool {
	if !a.IsGlobalUnicast() {
		return false
	}
	if a.Is6() {
		return true
	}
	n := netpoltest.PodNet(false)
	b := n.Addr().As4()
	mask := ^uint32(0) >> n.Bits()
	for i := range b {
		b[i] |= byte(mask >> (24 - 8*i))
	}
	return a != n.Addr() && a != netip.AddrFrom4(b)
}

// answers calls fn with each probe whose answer must come back: an allowed
// TCP probe to a pod of the lab (every pod answers a SYN with a RST); it
// says how many.
func answers(pr *prober, sent []netpoltest.Probe, want []bool, fn func(i int)) int {
	n := 0
	for i, pb := range sent {
		if want[i] && pb.Proto == netpol.TCP && pr.keep[pb.Dst] {
			n++
			if fn != nil {
				fn(i)
			}
		}
	}
	return n
}

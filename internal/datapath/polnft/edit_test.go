package polnft

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
)

// TestAddedRulesListAsNft: the Allows of random worlds' rules
// (netpoltest), appended to bucket chains through netlink (edits.write, as
// Apply appends them), list as the same Allows' rules added by nft (the
// Delta's `add rule`s): the two namespaces' tables compared after each
// world, as TestDeltaMakesScript compares them, in transactions of
// maxMessages/5 rules (VNETLAB_POLNFT_CHUNK: of that many, with a build
// whose maxMessages allows it). Every shape of a rule's match must have
// come up.
func TestAddedRulesListAsNft(t *testing.T) {
	viaNft, viaNetlink := "vnl-polnft-bynft", "vnl-polnft-bynetlink"
	namespaces(t, viaNft, viaNetlink)
	chains := map[string]string{ingress: "ingress-t/p/0", egress: "egress-t/p/0"}
	frame := Script(&netpol.Rules{}) + "add chain " + table + " " + chains[ingress] + "\nadd chain " + table + " " + chains[egress] + "\n"
	for _, ns := range []string{viaNft, viaNetlink} {
		if err := Load(ns, frame); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	chunk := testnet.EnvInt("VNETLAB_POLNFT_CHUNK", maxMessages/5)
	for seed := uint64(1); seed <= 200; seed++ {
		r := netpol.Compile(netpoltest.New(seed).World)
		var s script
		var ad []added
		for i := range r.Pods {
			for _, d := range directions {
				for _, a := range d.side(&r.Pods[i]).Allow {
					if !writable(a) {
						seen["not writable"]++
						continue
					}
					d.rules(&s, chains[d.name], a)
					ad = append(ad, added{appendTo{chains[d.name], a}, d})
					for _, m := range matchesOf(a) {
						for _, k := range shapes(m, a) {
							seen[k]++
						}
					}
				}
			}
		}
		if len(ad) == 0 {
			continue
		}
		for _, ns := range []string{viaNft, viaNetlink} {
			if err := Load(ns, "flush chain "+table+" "+chains[ingress]+"\nflush chain "+table+" "+chains[egress]); err != nil {
				t.Fatal(err)
			}
		}
		if err := Load(viaNft, s.String()); err != nil {
			t.Fatalf("world %d: nft: %v", seed, err)
		}
		for len(ad) > 0 {
			n := 1
			for n < len(ad) && (edits{adds: ad[:n+1]}).messages() <= 5*chunk {
				n++
			}
			if err := (edits{adds: ad[:n]}).write(viaNetlink); err != nil {
				t.Fatalf("world %d: the rules of %d Allows through netlink: %v", seed, n, err)
			}
			ad = ad[n:]
		}
		if diff := differs(t, viaNetlink, viaNft); diff != "" {
			t.Fatalf("world %d: the table with the rules added through netlink %s\nthe rules as nft added them:\n%s", seed, diff, s.String())
		}
	}
	t.Logf("the shapes of the rules added: %v", seen)
	for _, k := range []string{"any peer", "one pod", "pods", "IPv4", "IPv6", "prefix of whole bytes", "prefix masked", "one except", "excepts", "any port", "ports", "port ranges"} {
		if seen[k] == 0 {
			t.Errorf("no rule had %s", k)
		}
	}
}

// shapes is what kinds of match the rule of m in Allow a has.
func shapes(m peerMatch, a *netpol.Allow) []string {
	var out []string
	switch {
	case m.f == nil:
		out = append(out, "any peer")
	case m.block == nil && len(m.pods) == 1:
		out = append(out, "one pod")
	case m.block == nil:
		out = append(out, "pods")
	case m.block.CIDR.Bits()%8 == 0:
		out = append(out, "prefix of whole bytes")
	default:
		out = append(out, "prefix masked")
	}
	if m.f != nil {
		out = append(out, map[bool]string{true: "IPv4", false: "IPv6"}[m.f.is4])
	}
	if m.block != nil && len(m.block.Except) > 0 {
		out = append(out, map[bool]string{true: "one except", false: "excepts"}[len(m.block.Except) == 1])
	}
	switch {
	case a.AnyPort:
		out = append(out, "any port")
	case strings.Contains(portsText(a), "-"):
		out = append(out, "port ranges")
	default:
		out = append(out, "ports")
	}
	return out
}

// TestApplyAppendsOrFallsBack: Apply appends an added policy's rules to
// a pod whose buckets have others (1,000 policies over Buckets buckets)
// through netlink, leaving the bucket's other rules as they were; into a
// namespace whose table lacks the pod's chains, the netlink transaction
// fails and it writes the Delta, which fails too, and then the whole
// table. After each the table lists as
// Script's of the rules after.
func TestApplyAppendsOrFallsBack(t *testing.T) {
	applied, bare, whole := "vnl-polnft-append", "vnl-polnft-bare", "vnl-polnft-appendwhole"
	namespaces(t, applied, bare, whole)
	w, allow := netpoltest.BenchWorld(1000)
	c := netpol.NewCompilerOf(w, nil)
	r := c.Rules()
	c.Changes() // those of making the world
	for _, ns := range []string{applied, bare} {
		script := Script(&r)
		if ns == bare {
			script = Script(&netpol.Rules{})
		}
		if err := Load(ns, script); err != nil {
			t.Fatal(err)
		}
	}
	c.SetPolicy(allow)
	changes, now := c.Changes(), c.Rules()
	ed, ok := editsOf(changes, Buckets)
	if !ok || len(ed.adds) != 1 || len(ed.drops) > 0 {
		t.Fatalf("adding one policy to 1,000 selecting one pod is not one Allow to append: %v %+v", ok, ed)
	}
	ad := ed.adds
	if err := Load(whole, Script(&now)); err != nil {
		t.Fatal(err)
	}
	before := handles(t, applied, ad[0].chain)
	for _, ns := range []string{applied, bare} {
		if err := Apply(changes, &now)(ns); err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		if diff := differs(t, ns, whole); diff != "" {
			t.Fatalf("%s: the table after Apply %s", ns, diff)
		}
	}
	after := handles(t, applied, ad[0].chain)
	if kept := len(after) - len(minusHandles(after, before)); kept != len(before) || len(after) != len(before)+len(matchesOf(ad[0].a)) {
		t.Errorf("bucket %s had %d rules, has %d, of which %d kept their handles: want all kept and the Allow's %d added", ad[0].chain, len(before), len(after), kept, len(matchesOf(ad[0].a)))
	}
}

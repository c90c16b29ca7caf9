package netpol_test

import (
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
)

// envInt is the environment's variable name as a number, def when unset.
func envInt(t testing.TB, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: not a number", name, s)
	}
	return n
}

// TestCompilerMatchesCompile holds the incremental compiler to the
// reference: random worlds (netpoltest) loaded into a Compiler, then random
// changes (policies set and deleted, pods added, relabelled, readdressed,
// given other named ports and deleted, namespaces relabelled and deleted)
// applied to both; after each step the Compiler's rules must equal
// Compile's of the same world exactly, and the pods it reports changed must
// be exactly those whose rules differ from the step before. Half the
// sequences keep every pod's rules, half those of every other pod (a
// node's, as CompileWhere).
//
// 200 sequences of 60 steps by default; VNETLAB_INCR_SEQS and
// VNETLAB_INCR_STEPS scale it, VNETLAB_INCR_SEED=N runs sequence N alone.
func TestCompilerMatchesCompile(t *testing.T) {
	seqs, steps := envInt(t, "VNETLAB_INCR_SEQS", 200), envInt(t, "VNETLAB_INCR_STEPS", 60)
	first := uint64(1)
	if s := os.Getenv("VNETLAB_INCR_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("VNETLAB_INCR_SEED=%q: not a number", s)
		}
		first, seqs = n, 1
	}
	total := 0
	for seed := first; seed < first+uint64(seqs); seed++ {
		total += compilerSequence(t, seed, steps)
		if t.Failed() {
			return
		}
	}
	t.Logf("%d sequences, %d steps, every step equal to Compile", seqs, total)
}

// compilerSequence runs sequence seed; it returns the steps it took.
func compilerSequence(t *testing.T, seed uint64, steps int) int {
	g := netpoltest.New(seed)
	var keep func(*netpol.Pod) bool
	if seed%2 == 0 {
		keep = func(p *netpol.Pod) bool { return p.IPs[0].As16()[15]%2 == 0 }
	}
	rerun := fmt.Sprintf("rerun: VNETLAB_INCR_SEED=%d VNETLAB_INCR_STEPS=%d go test -run TestCompilerMatchesCompile ./internal/datapath/netpol/", seed, steps)
	c := netpol.NewCompilerOf(g.World, keep)
	prev := reference(g.World, keep)
	if !compareRules(t, c.Rules(), prev) {
		t.Errorf("sequence %d, the world loaded: the compiler's rules differ from Compile's\n%s\n%s", seed, g, rerun)
		return 0
	}
	var done []string
	for step := 1; step <= steps; step++ {
		ch := g.Change()
		done = append(done, ch.String())
		before := c.Rules()
		ch.ApplyTo(c)
		want := reference(g.World, keep)
		fail := func(what string) {
			t.Errorf("sequence %d step %d: %s\nthe changes:\n%s\nthe world now:\n%s\n%s", seed, step, what,
				strings.Join(done, "\n"), g, rerun)
		}
		if !compareRules(t, c.Rules(), want) {
			fail("the compiler's rules differ from Compile's")
			return step
		}
		wantChanged := changedPods(prev, want)
		changes := c.Changes()
		var got []netpol.PodKey
		for _, ch := range changes {
			got = append(got, ch.Key)
		}
		if !slices.Equal(got, wantChanged) {
			fail(fmt.Sprintf("the compiler says pods %v changed; their rules say %v", got, wantChanged))
			return step
		}
		if msg := checkChanges(changes, &before, c.Rules()); msg != "" {
			fail(msg)
			return step
		}
		// The Allows the compiler handed out, before the change and after,
		// still hash as their fields do (the hash they carry was not left
		// behind by a change to an Allow after it was made).
		for _, r := range []netpol.Rules{before, c.Rules()} {
			if msg := staleHash(r); msg != "" {
				fail(msg)
				return step
			}
		}
		// Diff of the rules before and after (which share the unchanged
		// pods' Allows) names the same pods, with each side's rules.
		after := c.Rules()
		var diffed []netpol.PodKey
		for _, d := range netpol.Diff(&before, &after) {
			diffed = append(diffed, d.Key)
			if (d.Old == nil) != !slices.ContainsFunc(before.Pods, func(p netpol.PodRules) bool { return p.Namespace == d.Key.Namespace && p.Pod == d.Key.Name }) ||
				(d.New == nil) != !slices.ContainsFunc(after.Pods, func(p netpol.PodRules) bool { return p.Namespace == d.Key.Namespace && p.Pod == d.Key.Name }) {
				fail(fmt.Sprintf("Diff's change of pod %v has the wrong sides", d.Key))
				return step
			}
		}
		if !slices.Equal(diffed, wantChanged) {
			fail(fmt.Sprintf("Diff says pods %v changed; their rules say %v", diffed, wantChanged))
			return step
		}
		prev = want
	}
	return steps
}

// staleHash names an Allow of r whose Hash is not its fields' ("": none).
func staleHash(r netpol.Rules) string {
	for _, p := range r.Pods {
		for _, a := range slices.Concat(p.Ingress.Allow, p.Egress.Allow) {
			fresh := netpol.Allow{AnyPeer: a.AnyPeer, Pods: a.Pods, Blocks: a.Blocks, AnyPort: a.AnyPort, Ports: a.Ports}
			if a.Hash() != fresh.Hash() {
				return fmt.Sprintf("pod %s/%s: an Allow hashes to %#x, its fields to %#x", p.Namespace, p.Pod, a.Hash(), fresh.Hash())
			}
		}
	}
	return ""
}

// checkChanges holds a Compiler's changes to the rules before and after
// them: each change's Old and New are the pod's rules there, and its
// Delta, when given, takes Old's Allows to New's (as multisets) on the
// same addresses and isolation. It says what is wrong ("": nothing).
func checkChanges(changes []netpol.PodChange, before *netpol.Rules, after netpol.Rules) string {
	find := func(r *netpol.Rules, k netpol.PodKey) *netpol.PodRules {
		for i := range r.Pods {
			if r.Pods[i].Namespace == k.Namespace && r.Pods[i].Pod == k.Name {
				return &r.Pods[i]
			}
		}
		return nil
	}
	for _, ch := range changes {
		old, now := find(before, ch.Key), find(&after, ch.Key)
		if !reflect.DeepEqual(old, ch.Old) || !reflect.DeepEqual(now, ch.New) {
			return fmt.Sprintf("the change of pod %v: its Old or New is not the pod's rules before or after", ch.Key)
		}
		if ch.Delta == nil {
			continue
		}
		if !slices.Equal(old.IPs, now.IPs) || old.Ingress.Isolated != now.Ingress.Isolated || old.Egress.Isolated != now.Egress.Isolated {
			return fmt.Sprintf("the change of pod %v has a delta, but its addresses or isolation changed", ch.Key)
		}
		sides := []struct {
			name       string
			was, is    []*netpol.Allow
			came, went []*netpol.Allow
		}{{"ingress", old.Ingress.Allow, now.Ingress.Allow, ch.Delta.Ingress.Came, ch.Delta.Ingress.Went},
			{"egress", old.Egress.Allow, now.Egress.Allow, ch.Delta.Egress.Came, ch.Delta.Egress.Went}}
		for _, sd := range sides {
			count := map[string]int{}
			for _, a := range sd.was {
				count[fmt.Sprint(a)]++
			}
			for _, a := range sd.went {
				if count[fmt.Sprint(a)]--; count[fmt.Sprint(a)] < 0 {
					return fmt.Sprintf("the delta of pod %v takes %s Allow %v away, which it did not have", ch.Key, sd.name, a)
				}
			}
			for _, a := range sd.came {
				count[fmt.Sprint(a)]++
			}
			for _, a := range sd.is {
				count[fmt.Sprint(a)]--
			}
			for a, n := range count {
				if n != 0 {
					return fmt.Sprintf("the delta of pod %v leaves %s Allow %s %+d times against its rules after", ch.Key, sd.name, a, n)
				}
			}
		}
	}
	return ""
}

// reference is Compile's rules of w, its pods and policies put in the
// compiler's order first (by namespace and name; by key): the order of a
// pod's Allows follows them.
func reference(w *netpol.World, keep func(*netpol.Pod) bool) netpol.Rules {
	o := &netpol.World{Namespaces: w.Namespaces, Pods: slices.Clone(w.Pods), Policies: slices.Clone(w.Policies)}
	slices.SortFunc(o.Pods, func(a, b netpol.Pod) int {
		return strings.Compare(a.Namespace+"\x00"+a.Name, b.Namespace+"\x00"+b.Name)
	})
	for i := range o.Policies {
		if o.Policies[i].Namespace == "" {
			o.Policies[i].Namespace = netpol.DefaultNamespace
		}
	}
	slices.SortFunc(o.Policies, func(a, b networkingv1.NetworkPolicy) int {
		return strings.Compare(netpol.PolicyKey(&a), netpol.PolicyKey(&b))
	})
	return netpol.CompileWhere(o, keep)
}

// compareRules says whether got equals want, reporting the first pod that
// differs.
func compareRules(t *testing.T, got, want netpol.Rules) bool {
	t.Helper()
	if len(got.Pods) == len(want.Pods) && (len(got.Pods) == 0 || reflect.DeepEqual(got, want)) {
		return true
	}
	for i := range max(len(got.Pods), len(want.Pods)) {
		var g, w *netpol.PodRules
		if i < len(got.Pods) {
			g = &got.Pods[i]
		}
		if i < len(want.Pods) {
			w = &want.Pods[i]
		}
		if !reflect.DeepEqual(g, w) {
			t.Logf("pod %d: compiler %+v\nCompile %+v", i, g, w)
			break
		}
	}
	return false
}

// changedPods are the pods whose rules differ between a and b, sorted.
func changedPods(a, b netpol.Rules) []netpol.PodKey {
	byKey := func(r netpol.Rules) map[netpol.PodKey]netpol.PodRules {
		m := map[netpol.PodKey]netpol.PodRules{}
		for _, p := range r.Pods {
			m[netpol.PodKey{Namespace: p.Namespace, Name: p.Pod}] = p
		}
		return m
	}
	am, bm := byKey(a), byKey(b)
	var out []netpol.PodKey
	for k, p := range am {
		if q, ok := bm[k]; !ok || !reflect.DeepEqual(p, q) {
			out = append(out, k)
		}
	}
	for k := range bm {
		if _, ok := am[k]; !ok {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(x, y netpol.PodKey) int {
		return strings.Compare(x.Namespace+"\x00"+x.Name, y.Namespace+"\x00"+y.Name)
	})
	return out
}

// TestAllowHash: equal Allows hash alike, and a change of any field moves
// the hash (so a bucket's content is its Allows'); the hash is pinned (the
// same in every process and every build: a data plane's buckets outlive
// the process that wrote them).
func TestAllowHash(t *testing.T) {
	base := netpol.Allow{Pods: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
		Blocks: []netpol.Block{{CIDR: netip.MustParsePrefix("10.1.0.0/16"), Except: []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")}}},
		Ports:  []netpol.PortRange{{Proto: netpol.TCP, First: 80, Last: 90}}}
	same := base
	same.Pods = slices.Clone(base.Pods)
	if base.Hash() != same.Hash() {
		t.Fatal("equal Allows hash differently")
	}
	if h := base.Hash(); h != 0xbb89f50d03b7534c {
		t.Errorf("the base hashes to %#x, pinned at 0xbb89f50d03b7534c", h)
	}
	others := []*netpol.Allow{
		{AnyPeer: true, Blocks: base.Blocks, Ports: base.Ports, Pods: base.Pods},
		{AnyPort: true, Blocks: base.Blocks, Pods: base.Pods},
		{Pods: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Blocks: base.Blocks, Ports: base.Ports},
		{Pods: base.Pods, Blocks: []netpol.Block{{CIDR: netip.MustParsePrefix("10.1.0.0/16")}}, Ports: base.Ports},
		{Pods: base.Pods, Blocks: base.Blocks, Ports: []netpol.PortRange{{Proto: netpol.UDP, First: 80, Last: 90}}},
		{Pods: base.Pods, Blocks: base.Blocks, Ports: []netpol.PortRange{{Proto: netpol.TCP, First: 80, Last: 91}}},
	}
	for i, o := range others {
		if o.Hash() == base.Hash() {
			t.Errorf("Allow %d differs from the base but hashes alike", i)
		}
	}
}

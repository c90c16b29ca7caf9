package polnft

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// A delta makes the table a whole script makes: random worlds
// (netpoltest), each changed step by step as a cluster's informers change
// it (a Compiler's rules, as a node's controller has them); at each step
// the table of the rules before, with the step's changes written on it as
// Apply writes them (rules taken or added through netlink, or the Delta
// loaded), must list as the table Script makes of the rules after, loaded
// fresh in a second namespace (the listings without handles and counters'
// values, chains and map elements in name order, a bucket chain's rules
// in any order), and a pod isolated before and after keeps its counters
// (the same objects: their counts go on). Odd sequences spread the Allows
// over Buckets buckets, even ones over 3, so that buckets are refilled as
// well as added and deleted.
//
// VNETLAB_POLNFT_SEQUENCES and VNETLAB_POLNFT_STEPS scale it up;
// VNETLAB_POLNFT_SEED is the first sequence's seed, which a failure names.
func TestDeltaMakesScript(t *testing.T) {
	seqs, steps, first := testnet.EnvInt("VNETLAB_POLNFT_SEQUENCES", 12), testnet.EnvInt("VNETLAB_POLNFT_STEPS", 25), testnet.EnvInt("VNETLAB_POLNFT_SEED", 1)
	delta, whole := "vnl-polnft-delta", "vnl-polnft-whole"
	namespaces(t, delta, whole)
	did := map[string]int{}
	for seed := first; seed < first+seqs; seed++ {
		nb := uint64(Buckets)
		if seed%2 == 0 {
			nb = 3
		}
		g := netpoltest.New(uint64(seed))
		c := netpol.NewCompilerOf(g.World, nil)
		old := c.Rules()
		if err := Load(delta, scriptOf(&old, nb)); err != nil {
			t.Fatalf("sequence %d: the world loaded: %v", seed, err)
		}
		var done []string
		for step := 1; step <= steps; step++ {
			ch := g.Change()
			done = append(done, ch.String())
			ch.ApplyTo(c)
			now := c.Rules()
			// Half the sequences take the compiler's changes (with their
			// deltas: rules appended to buckets), half diff the rules.
			changes := c.Changes()
			if seed%4 == 0 || seed%4 == 3 {
				changes = netpol.Diff(&old, &now)
			}
			d := deltaOf(changes, nb)
			fail := func(format string, args ...any) {
				t.Fatalf("sequence %d (%d buckets) step %d: %s\nthe delta:\n%s\nthe changes:\n%s\nthe world now:\n%s\nrerun: VNETLAB_POLNFT_SEED=%d VNETLAB_POLNFT_SEQUENCES=1 VNETLAB_POLNFT_STEPS=%d",
					seed, nb, step, fmt.Sprintf(format, args...), d, strings.Join(done, "\n"), g, seed, step)
			}
			before := listing(t, delta)
			if ed, ok := editsOf(changes, nb); ok {
				// As Apply does, with no whole table to fall back on:
				// the rules added through netlink must list as nft's own.
				if err := ed.write(delta); err != nil {
					fail("writing %d deletions and %d Allows added through netlink: %v", len(ed.drops), len(ed.adds), err)
				}
				did[editKind(ed)]++
			} else if d != "" {
				if err := Load(delta, d); err != nil {
					fail("%v", err)
				}
			}
			if err := Load(whole, scriptOf(&now, nb)); err != nil {
				fail("the whole table: %v", err)
			}
			got, want := listing(t, delta), listing(t, whole)
			if only, extra := minus(want.lines, got.lines), minus(got.lines, want.lines); len(only) > 0 || len(extra) > 0 {
				fail("the table after the delta lacks\n  %s\nand has besides\n  %s", strings.Join(only, "\n  "), strings.Join(extra, "\n  "))
			}
			for _, pc := range changes {
				for _, dir := range directions {
					o, n := dir.of(pc.Old, nb, nil), dir.of(pc.New, nb, nil)
					if o == nil || n == nil {
						continue
					}
					for _, k := range []string{Evaluated, Denied} {
						if h := before.counters[o.counter(k)]; h != got.counters[n.counter(k)] {
							fail("counter %s was made anew (handle %d, now %d)", o.counter(k), h, got.counters[n.counter(k)])
						}
					}
				}
			}
			count(did, d)
			for _, pc := range changes {
				for _, dir := range directions {
					var s script
					if pc.Delta != nil && dir.appended(&s, pc, nb) && s.Len() > 0 {
						did["side by its delta"]++
					}
				}
			}
			old = now
		}
	}
	t.Logf("%d sequences of %d steps from seed %d; the deltas did: %v", seqs, steps, first, did)
	if seqs*steps >= 100 {
		for _, k := range []string{"side by its delta", "bucket added", "bucket refilled", "bucket deleted", "pod chain rewritten", "pod isolated", "pod no longer isolated"} {
			if did[k] == 0 {
				t.Errorf("no delta had a %s", k)
			}
		}
	}
}

// editKind is what edits ed do, as TestDeltaMakesScript counts them.
func editKind(ed edits) string {
	switch {
	case len(ed.adds) == 0:
		return "rules deleted through netlink"
	case len(ed.drops) == 0:
		return "rules added through netlink"
	}
	return "rules deleted and added through netlink"
}

// bucketChain matches a bucket chain's name (a pod chain's, then /N).
var bucketChain = regexp.MustCompile(`^[^/]+/[^/]+/\d+$`)

// What a delta's commands did, by kind.
var deltaKinds = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"bucket added", regexp.MustCompile(`(?m)^add chain \S+ \S+ [^ /]+/[^ /]+/\d+$`)},
	{"bucket refilled", regexp.MustCompile(`(?m)^flush chain \S+ \S+ [^ /]+/[^ /]+/\d+\nadd rule`)},
	{"bucket deleted", regexp.MustCompile(`(?m)^delete chain \S+ \S+ [^ /]+/[^ /]+/\d+$`)},
	{"pod chain rewritten", regexp.MustCompile(`(?m)^flush chain \S+ \S+ [^ /]+/[^ /]+\nadd rule`)},
	{"pod isolated", regexp.MustCompile(`(?m)^add counter \S+ \S+ \S+/evaluated$`)},
	{"pod no longer isolated", regexp.MustCompile(`(?m)^delete counter \S+ \S+ \S+/evaluated$`)},
}

func count(did map[string]int, delta string) {
	for _, k := range deltaKinds {
		did[k.kind] += len(k.re.FindAllString(delta, -1))
	}
}

// listed is a table as nft lists it, in lines that do not depend on the
// order it was made in: each object without its handle, a counter without
// its counts, a map's elements sorted, each rule after its chain's name
// and its place in the chain, all sorted; and the counters' handles by
// name.
type listed struct {
	lines    []string
	counters map[string]int
}

func listing(t *testing.T, ns string) listed {
	t.Helper()
	out, err := proc.Command(context.Background(), ns, "nft", "-j", "list", "table", "inet", Table).Output()
	if err != nil {
		t.Fatalf("nft list table in %s: %v", ns, err)
	}
	var doc struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	l := listed{counters: map[string]int{}}
	place := map[string]int{}
	for _, o := range doc.Nftables {
		for kind, v := range o {
			if kind == "metainfo" {
				continue
			}
			if kind == "counter" {
				l.counters[v["name"].(string)] = int(v["handle"].(float64))
				delete(v, "packets")
				delete(v, "bytes")
			}
			delete(v, "handle")
			line := kind
			if el, ok := v["elem"].([]any); ok {
				slices.SortFunc(el, func(a, b any) int { return strings.Compare(jsonOf(t, a), jsonOf(t, b)) })
			}
			if kind == "rule" {
				ch := v["chain"].(string)
				line = fmt.Sprintf("rule %s #%03d", ch, place[ch])
				if bucketChain.MatchString(ch) {
					line = "rule " + ch // its rules only allow: any order
				}
				place[ch]++
			}
			l.lines = append(l.lines, line+" "+jsonOf(t, v))
		}
	}
	slices.Sort(l.lines)
	return l
}

func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// minus is the lines of a not in b (both sorted).
func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			out = append(out, x)
		}
	}
	return out
}

// TestDeltaByAllows: a policy added to and deleted from many that select
// one pod (the apply-latency runs' shape, netpoltest.BenchWorld), and a
// pod labelled into and out of its peers, change the selected pod by its
// Allows alone, written through netlink as Apply writes them: added, the
// policy's rules appended to their buckets; deleted, deleted by their
// comments; a peer come or gone, the policy's Allow replaced (the old
// one's rules deleted, the new one's added, in one transaction). The
// Delta, too, appends an added policy's rules and refills the buckets
// otherwise. After each step the table lists as Script's of the rules
// after, a bucket's rules in any order.
func TestDeltaByAllows(t *testing.T) {
	delta, whole := "vnl-polnft-bydelta", "vnl-polnft-bywhole"
	namespaces(t, delta, whole)
	const nb = 3
	w, allow := netpoltest.BenchWorld(40)
	c := netpol.NewCompilerOf(w, nil)
	r := c.Rules()
	if err := Load(delta, scriptOf(&r, nb)); err != nil {
		t.Fatal(err)
	}
	relabel := func(label string) func() {
		return func() {
			p2 := *c.Pod(netpol.PodKey{Namespace: "m", Name: "p2"})
			p2.Labels = netpol.Labels{"vnetlab.pod": label}
			c.SetPod(p2)
		}
	}
	add, del := func() { c.SetPolicy(allow) }, func() { c.DeletePolicy(allow.Namespace, allow.Name) }
	for _, step := range []struct {
		what        string
		change      func()
		drops, adds bool
	}{
		{"the policy added", add, false, true},
		{"the policy deleted", del, true, false},
		{"the policy added again", add, false, true},
		{"p2 labelled into its peers", relabel("p1"), true, true},
		{"p2 labelled out of them", relabel("p2"), true, true},
		{"the policy deleted again", del, true, false},
	} {
		step.change()
		changes := c.Changes()
		var byDelta int
		for _, pc := range changes {
			for _, dir := range directions {
				var s script
				if pc.Delta != nil && dir.appended(&s, pc, nb) && s.Len() > 0 {
					byDelta++
				}
			}
		}
		if want := map[bool]int{true: 0, false: 1}[step.drops && step.adds]; byDelta != want {
			t.Fatalf("%s: %d sides changed by their delta, want %d", step.what, byDelta, want)
		}
		d := deltaOf(changes, nb)
		if strings.Contains(d, "chain") != step.drops {
			t.Errorf("%s: the delta names a chain when it should only (Allows taken: refilling) or never (only added: appending):\n%s", step.what, d)
		}
		ed, ok := editsOf(changes, nb)
		if !ok || len(ed.drops) > 0 != step.drops || len(ed.adds) > 0 != step.adds {
			t.Fatalf("%s: the changes are not rules to delete (%v) and to add (%v): %v %+v", step.what, step.drops, step.adds, ok, ed)
		}
		if err := ed.write(delta); err != nil {
			t.Fatalf("%s: %v\n%s", step.what, err, d)
		}
		now := c.Rules()
		if err := Load(whole, scriptOf(&now, nb)); err != nil {
			t.Fatal(err)
		}
		if diff := differs(t, delta, whole); diff != "" {
			t.Fatalf("%s: the table after the edits %s", step.what, diff)
		}
	}
}

// differs is how the table in namespace ns lists unlike the one in want:
// the lines it lacks and those it has besides ("" when alike).
func differs(t *testing.T, ns, want string) string {
	t.Helper()
	got, w := listing(t, ns), listing(t, want)
	only, extra := minus(w.lines, got.lines), minus(got.lines, w.lines)
	if len(only)+len(extra) == 0 {
		return ""
	}
	return fmt.Sprintf("lacks\n  %s\nand has besides\n  %s", strings.Join(only, "\n  "), strings.Join(extra, "\n  "))
}

// TestApplyFindsOrFallsBack: Apply deletes a deleted policy's rules from a
// pod whose buckets keep others (1,000 policies over Buckets buckets) by
// their comments, not by an nft transaction; applied again to the table it
// already changed, it cannot find them and writes the Delta instead; after
// each the table lists as Script's of the rules after.
func TestApplyFindsOrFallsBack(t *testing.T) {
	applied, whole := "vnl-polnft-apply", "vnl-polnft-applywhole"
	namespaces(t, applied, whole)
	w, allow := netpoltest.BenchWorld(1000)
	c := netpol.NewCompilerOf(w, nil)
	c.SetPolicy(allow)
	r := c.Rules()
	c.Changes() // those of making the world
	if err := Load(applied, Script(&r)); err != nil {
		t.Fatal(err)
	}
	c.DeletePolicy(allow.Namespace, allow.Name)
	changes, now := c.Changes(), c.Rules()
	ed, ok := editsOf(changes, Buckets)
	if !ok || len(ed.adds) > 0 {
		t.Fatalf("deleting one of 1,001 policies selecting one pod is not rules to delete: %v %+v", ok, ed)
	}
	if err := Load(whole, Script(&now)); err != nil {
		t.Fatal(err)
	}
	var bucket string
	for bucket = range ed.drops {
	}
	for _, again := range []bool{false, true} {
		before := handles(t, applied, bucket)
		if err := Apply(changes, &now)(applied); err != nil {
			t.Fatal(err)
		}
		// Deleted, the bucket's other rules keep their handles; written
		// again by the Delta, they have new ones.
		if fresh := len(minusHandles(handles(t, applied, bucket), before)); fresh > 0 != again {
			t.Errorf("again %v: %d of bucket %s's rules have new handles", again, fresh, bucket)
		}
		if err := ed.write(applied); err == nil {
			t.Fatalf("the rules %v are still in the table after Apply (again: %v)", ed.drops, again)
		}
		if diff := differs(t, applied, whole); diff != "" {
			t.Fatalf("again %v: the table after Apply %s", again, diff)
		}
	}
}

// handles is the handles of the rules of chain name in the table in ns.
func handles(t *testing.T, ns, name string) []uint64 {
	t.Helper()
	h, err := nsutil.FD(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		t.Fatal(err)
	}
	tb := &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}
	rules, err := c.GetRules(tb, &nftables.Chain{Name: name, Table: tb})
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, r := range rules {
		out = append(out, r.Handle)
	}
	return out
}

// minusHandles is the handles of a not in b.
func minusHandles(a, b []uint64) []uint64 {
	var out []uint64
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// namespaces makes network namespaces of these names for the test (one
// left by a run killed before its cleanup deleted first), deleted after
// it; without root or nft it skips the test.
func namespaces(t *testing.T, names ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates network namespaces")
	}
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft")
	}
	for _, ns := range names {
		if nsutil.Exists(ns) {
			_ = nsutil.Delete(ns)
		}
		if err := nsutil.Create(ns, "vnetlab polnft test"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = nsutil.Delete(ns) })
	}
}

package labpolicy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// The iptables provider's Update leaves what a fresh Install leaves: random
// worlds (netpoltest), each taken through random changes by a Compiler (as
// a cluster's controller takes them), every other world with 100
// generated policies (the policies knob's) selecting every pod of its
// first pod's namespace, one of them deleted or set again at every other
// change, amid its bucket; Updated change by change in one lab's node and
// Installed afresh in another's at every change; the two nodes' rules
// (iptables-save, ip6tables-save: every chain's rules in order, counters
// aside) and sets (ipset save, members sorted) must be the same.
// VNETLAB_IPTEQ_SEQS and VNETLAB_IPTEQ_STEPS scale it; VNETLAB_IPTEQ_SEED
// is the first sequence's seed.
func TestIptablesUpdateEqualsInstall(t *testing.T) {
	requireIpset(t)
	seqs, steps, first := testnet.EnvInt("VNETLAB_IPTEQ_SEQS", 6), testnet.EnvInt("VNETLAB_IPTEQ_STEPS", 10), testnet.EnvInt("VNETLAB_IPTEQ_SEED", 1)
	// Both families' rules (the worlds' pods have IPv6 addresses too): the
	// provider writes the lab's families, whatever its wiring.
	node := func(name string) *lab.State {
		l, _ := testnet.UpLab(t, lab.Spec{Name: name, Mode: modes.VethRouted, PodCIDR: lab.DefaultPodCIDR, Family: family.IPv4}, 2)
		l.Release()
		st := *l.State
		st.Spec.Family = family.Dual
		return &st
	}
	updated, fresh := node("np-ipteq-u"), node("np-ipteq-f")
	p, _ := Get(IPTables)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	compared := 0
	for seed := first; seed < first+seqs; seed++ {
		g := netpoltest.New(uint64(seed))
		var gen []networkingv1.NetworkPolicy
		if seed%2 == 1 {
			var err error
			gen, _, err = Generate(100, 0, g.World.Pods[0], nil, g.World.Pods, g.Family.HasIPv4(), g.Family.HasIPv6(), nil)
			must("generate", err)
			for i := range gen { // every pod of the first pod's namespace
				gen[i].Spec.PodSelector = metav1.LabelSelector{}
			}
			g.World.Policies = append(g.World.Policies, gen...)
		}
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		c := netpol.NewCompilerOf(g.World, nil)
		prev := c.Rules()
		must("remove", p.Remove(updated))
		must("install", p.Install(updated, &prev))
		var done []string
		for step := 1; step <= steps; step++ {
			draw := g.Change
			if len(gen) > 0 && step%2 == 0 {
				draw = func() netpoltest.Change { return churn(g.World, gen, rng) }
			}
			ch := draw()
			done = append(done, ch.String())
			ch.ApplyTo(c)
			next := c.Rules()
			must("update", p.Update(updated, &prev, &next, netpol.Diff(&prev, &next)))
			must("remove", p.Remove(fresh))
			must("install", p.Install(fresh, &next))
			got, want := iptSaved(t, updated.Nodes[0].NS), iptSaved(t, fresh.Nodes[0].NS)
			if d := lineDiff(got, want); d != "" {
				t.Fatalf("sequence %d step %d: the updated node's rules and sets differ from a fresh install's (- updated only, + fresh only):\n%s\nthe changes:\n%s\nthe world now:\n%s\nrerun: VNETLAB_IPTEQ_SEED=%d VNETLAB_IPTEQ_SEQS=1 VNETLAB_IPTEQ_STEPS=%d",
					seed, step, d, strings.Join(done, "\n"), g, seed, step)
			}
			compared++
			prev = next
		}
	}
	must("remove", p.Remove(updated))
	must("remove", p.Remove(fresh))
	t.Logf("%d sequences, %d changes, every update equal to a fresh install", seqs, compared)
}

// churn deletes one of the generated policies gen from world w, or sets
// one that w lacks again, at random.
func churn(w *netpol.World, gen []networkingv1.NetworkPolicy, rng *rand.Rand) netpoltest.Change {
	p := gen[rng.IntN(len(gen))]
	i := slices.IndexFunc(w.Policies, func(q networkingv1.NetworkPolicy) bool { return q.Namespace == p.Namespace && q.Name == p.Name })
	if i < 0 {
		w.Policies = append(w.Policies, p)
		return netpoltest.Change{Kind: netpoltest.SetPolicy, Policy: &p}
	}
	if rng.IntN(2) == 0 { // mostly a deleted one set again
		for _, q := range gen {
			if !slices.ContainsFunc(w.Policies, func(r networkingv1.NetworkPolicy) bool { return r.Namespace == q.Namespace && r.Name == q.Name }) {
				w.Policies = append(w.Policies, q)
				return netpoltest.Change{Kind: netpoltest.SetPolicy, Policy: &q}
			}
		}
	}
	w.Policies = slices.Delete(w.Policies, i, i+1)
	return netpoltest.Change{Kind: netpoltest.DeletePolicy, NS: p.Namespace, Name: p.Name}
}

func requireIpset(t *testing.T) {
	t.Helper()
	requireRoot(t)
	for _, tool := range iptTools {
		if _, err := exec.LookPath(tool[0]); err != nil {
			t.Skipf("%s not installed", tool[0])
		}
	}
}

var (
	iptCounters = regexp.MustCompile(` \[\d+:\d+\]$`)
	ipsetRandom = regexp.MustCompile(` initval 0x[0-9a-f]+`)
)

// iptSaved is namespace ns's provider objects, comparable: every VNL-
// chain (declared, then its rules in order; chains sorted by name, counters
// left out), FORWARD's jump, and every vnl- set's header and members,
// sorted.
func iptSaved(t *testing.T, ns string) []string {
	t.Helper()
	var rules, sets []string
	for _, cmd := range [][]string{{"iptables-save", "-t", "filter"}, {"ip6tables-save", "-t", "filter"}, {"ipset", "save"}} {
		out, err := proc.Command(context.Background(), ns, cmd[0], cmd[1:]...).Output()
		if err != nil {
			t.Fatalf("%s in %s: %v", cmd[0], ns, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			switch {
			case strings.HasPrefix(l, ":VNL-"), strings.HasPrefix(l, "-A VNL-"), l == "-A FORWARD -j "+iptChain:
				rules = append(rules, cmd[0]+" "+iptCounters.ReplaceAllString(l, ""))
			case strings.HasPrefix(l, "create "+ipsetPrefix), strings.HasPrefix(l, "add "+ipsetPrefix):
				sets = append(sets, ipsetRandom.ReplaceAllString(l, ""))
			}
		}
	}
	chain := func(l string) string { return strings.Fields(strings.TrimPrefix(l, ":"))[2] }
	slices.SortStableFunc(rules, func(a, b string) int { return strings.Compare(chain(a), chain(b)) })
	slices.Sort(sets)
	return append(rules, sets...)
}

// lineDiff is the lines only in a (-) and only in b (+), "" when a and b
// are equal.
func lineDiff(a, b []string) string {
	if slices.Equal(a, b) {
		return ""
	}
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "+ "+l)
		}
	}
	for i := 0; len(out) == 0; i++ {
		if a[i] != b[i] {
			out = append(out, fmt.Sprintf("the same lines, in another order; the first that differs, line %d:\n- %s\n+ %s", i+1, a[i], b[i]))
		}
	}
	return strings.Join(out, "\n")
}

// What an Update costs the iptables provider with the policies knob's set
// in force (VNETLAB_IPT_COST=1; VNETLAB_IPT_COST_POLICIES, a comma list,
// default 0,1000,10000; VNETLAB_IPT_COST_REPEATS, default 10): one
// generated policy added, then deleted again, each Update timed alone (the
// transaction around it, the compile and netpol.Diff are not), p50 and
// max logged; at the end, the node's rules and sets compared with a fresh
// install's.
func TestIptablesUpdateCost(t *testing.T) {
	if os.Getenv("VNETLAB_IPT_COST") == "" {
		t.Skip("set VNETLAB_IPT_COST=1")
	}
	requireIpset(t)
	counts := strings.Split(os.Getenv("VNETLAB_IPT_COST_POLICIES"), ",")
	if counts[0] == "" {
		counts = []string{"0", "1000", "10000"}
	}
	repeats := testnet.EnvInt("VNETLAB_IPT_COST_REPEATS", 10)
	l, _ := testnet.UpLab(t, lab.Spec{Name: "np-iptcost", Mode: modes.VethRouted, PodCIDR: lab.DefaultPodCIDR, Family: family.IPv4}, 2)
	l.Release()
	st := l.State
	p, _ := Get(IPTables)
	rules := func(n int) *netpol.Rules {
		c := &Config{Provider: IPTables}
		d, err := BenchSet{Policies: n, Server: st.Pods[0], Clients: st.Pods[1:2], Ports: []uint16{7001}}.Doc(st, c)
		if err != nil {
			t.Fatal(err)
		}
		c.Policies = d.Policies
		r, err := Compile(st, c)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, s := range counts {
		var n int
		if _, err := fmt.Sscan(s, &n); err != nil {
			t.Fatalf("VNETLAB_IPT_COST_POLICIES: %q", s)
		}
		few, more := rules(n), rules(n+1)
		start := time.Now()
		if err := p.Install(st, few); err != nil {
			t.Fatal(err)
		}
		install := time.Since(start)
		var added, deleted []time.Duration
		for range repeats {
			for _, step := range []struct {
				old, new *netpol.Rules
				took     *[]time.Duration
			}{{few, more, &added}, {more, few, &deleted}} {
				changes := netpol.Diff(step.old, step.new)
				start := time.Now()
				if err := p.Update(st, step.old, step.new, changes); err != nil {
					t.Fatal(err)
				}
				*step.took = append(*step.took, time.Since(start))
			}
		}
		got := iptSaved(t, st.Nodes[0].NS)
		if err := p.Remove(st); err != nil {
			t.Fatal(err)
		}
		if err := p.Install(st, few); err != nil {
			t.Fatal(err)
		}
		if d := lineDiff(got, iptSaved(t, st.Nodes[0].NS)); d != "" {
			t.Errorf("%d policies: after the updates, the rules and sets differ from a fresh install's:\n%s", n, d)
		}
		if err := p.Remove(st); err != nil {
			t.Fatal(err)
		}
		ms := func(d []time.Duration) string {
			slices.Sort(d)
			return fmt.Sprintf("p50 %.1f ms, max %.1f ms", float64(d[len(d)/2].Microseconds())/1000, float64(d[len(d)-1].Microseconds())/1000)
		}
		t.Logf("%d policies (install %.0f ms): one added %s; one deleted %s (%d each)", n, float64(install.Microseconds())/1000, ms(added), ms(deleted), repeats)
	}
}

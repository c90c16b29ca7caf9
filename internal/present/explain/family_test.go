package explain

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// profiledCell is a tcp_rr cell of mode and family whose profile is the
// given stacks (of lab processes) over 1000 transactions, summarised with
// the default rules: the stage rules and explain on crafted stacks.
func profiledCell(mode string, fam family.Family, rate float64, stacks map[string]uint64) *results.Cell {
	p := &profile.Profile{Hz: 997, CPUs: 2, WallSec: 1, Events: map[string]uint64{}}
	for frames, n := range stacks {
		p.Stacks = append(p.Stacks, profile.Stack{Comm: "rr", Lab: true, Frames: strings.Split(frames, ";"), Count: n})
	}
	lookups := profile.EventFibLookup
	if fam == family.IPv6 {
		lookups = profile.EventFib6Lookup
	}
	p.Events[lookups] = 2e6
	return &results.Cell{Mode: mode, Path: "pod", Family: fam.Cell(), Test: "tcp_rr", Median: rate, Unit: "trans/s",
		Profile: runner.ProfileOf(profile.Summarize(p, profile.DefaultRules, 1e6, "transaction"))}
}

const (
	rxStack   = "handle_softirqs;net_rx_action;__napi_poll;process_backlog;__netif_receive_skb_one_core"
	sendStack = "[user];entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_sendto;tcp_sendmsg"
)

// dualRun is a dual-stack run of host (the baseline) and veth-routed: in
// veth-routed, IPv6 spends 300 more samples on route lookups and 100 on
// its output path than IPv4 does, the same TCP.
func dualRun() *results.File {
	f := &results.File{}
	f.Metadata.Settings.Baseline = "host"
	for _, fam := range []family.Family{family.IPv4, family.IPv6} {
		ip, route, rate := rxStack+";ip_rcv;ip_rcv_finish;ip_forward;ip_output;ip_finish_output2", rxStack+";ip_rcv;ip_route_input_noref;fib_table_lookup", 10000.0
		if fam == family.IPv6 {
			ip, route, rate = rxStack+";ipv6_rcv;ip6_rcv_finish;ip6_forward;ip6_output;ip6_finish_output2", rxStack+";ipv6_rcv;ip6_route_input;ip6_pol_route;fib6_table_lookup", 8000
		}
		f.Cells = append(f.Cells,
			profiledCell("host", fam, 20000, map[string]uint64{sendStack: 400}),
			profiledCell("veth-routed", fam, rate, map[string]uint64{sendStack: 400, ip: 100 + 100*uint64(len(fam.Cell())/4), route: 100 + 300*uint64(len(fam.Cell())/4)}))
	}
	return f
}

func TestFamilyPairsAndSentence(t *testing.T) {
	f := dualRun()
	pairs, err := FamilyPairs(f, "", []string{"veth-routed"})
	if err != nil || len(pairs) != 1 || pairs[0].A.Family != "" || pairs[0].B.Family != "ipv6" || pairs[0].B.Mode != "veth-routed" {
		t.Fatalf("FamilyPairs: %+v %v", pairs, err)
	}
	if all, err := FamilyPairs(f, "tcp_rr", nil); err != nil || len(all) != 2 {
		t.Errorf("FamilyPairs of every mode: %d pairs, %v", len(all), err)
	}
	e, err := Compare(pairs[0].A, pairs[0].B)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(e.Sentence)
	if e.A.Label != "veth-routed/ipv4" || e.B.Label != "veth-routed/ipv6" {
		t.Errorf("labels %q and %q: want each side's family written", e.A.Label, e.B.Label)
	}
	for _, want := range []string{
		"veth-routed/ipv6 spends 0.40 µs more data-path CPU per transaction than veth-routed/ipv4",
		"rate 0.8x",
		"+0.30 µs routing/forwarding (",
		"fib_table_lookup 0 vs 2 per transaction; fib6_table_lookup 2 vs 0 per transaction",
		"+0.10 µs IP output/input (ip6_finish_output2 0.20 µs self, not on veth-routed/ipv4's stacks)",
	} {
		if !strings.Contains(e.Sentence, want) {
			t.Errorf("sentence lacks %q: %s", want, e.Sentence)
		}
	}
	// TCP is the same on both sides: not in the sentence.
	if strings.Contains(e.Sentence, "TCP/UDP") {
		t.Errorf("sentence names TCP/UDP, equal on both sides: %s", e.Sentence)
	}
}

func TestFamilyPairsRefuse(t *testing.T) {
	f := dualRun()
	var v4 results.File
	for _, c := range f.Cells {
		if c.Family == "" {
			v4.Cells = append(v4.Cells, c)
		}
	}
	if _, err := FamilyPairs(&v4, "", nil); err == nil || !strings.Contains(err.Error(), "--ip-family dual") {
		t.Errorf("an IPv4-only run: %v", err)
	}
	var v6 results.File
	for _, c := range f.Cells {
		if c.Family != "" {
			v6.Cells = append(v6.Cells, c)
		}
	}
	if _, err := FamilyPairs(&v6, "", nil); err == nil || !strings.Contains(err.Error(), "no IPv6 cell has an IPv4 cell") {
		t.Errorf("an IPv6-only run: %v", err)
	}
}

// In a dual-stack run, the default pairs keep to one family, and names
// with a family (or a bare mode, the IPv4 cell) pick the right cells.
func TestSelectDualStack(t *testing.T) {
	f := dualRun()
	pairs, err := Select(f, nil, "")
	if err != nil || len(pairs) != 2 {
		t.Fatalf("default pairs: %d %v", len(pairs), err)
	}
	for _, p := range pairs {
		if p.A.Mode != "host" || p.B.Mode != "veth-routed" || p.A.Family != p.B.Family {
			t.Errorf("default pair %s against %s", p.B.ID(), p.A.ID())
		}
	}
	for _, c := range []struct{ a, b, famA, famB string }{
		{"veth-routed", "veth-routed/ipv6", "", "ipv6"},
		{"veth-routed/ipv4", "veth-routed/pod/ipv6/tcp_rr", "", "ipv6"},
		{"host/ipv6", "veth-routed/pod/ipv4/tcp_rr", "ipv6", ""},
	} {
		pairs, err := Select(f, []string{c.a, c.b}, "")
		if err != nil || len(pairs) != 1 || pairs[0].A.Family != c.famA || pairs[0].B.Family != c.famB {
			t.Errorf("--cells %s,%s: %+v %v", c.a, c.b, pairs, err)
		}
	}
}

// A run of one mode with pod and service paths (an IPv6-only one here,
// whose baseline mode has no other mode's cell to face): by default each
// service cell is explained against its pod cell, as the table's "vs pod".
func TestSelectServiceVsPod(t *testing.T) {
	f := &results.File{}
	f.Metadata.Settings.Baseline = "veth-ebpf"
	pod := profiledCell("veth-ebpf", family.IPv6, 9000, map[string]uint64{sendStack: 400})
	svc := profiledCell("veth-ebpf", family.IPv6, 8700, map[string]uint64{sendStack: 430})
	svc.Path, svc.Provider = "service", "ebpf"
	unprofiled := &results.Cell{Mode: "veth-ebpf", Path: "service", Provider: "iptables", Family: "ipv6", Test: "tcp_rr"}
	f.Cells = []*results.Cell{pod, svc, unprofiled}
	pairs, err := Select(f, nil, "")
	if err != nil || len(pairs) != 1 || pairs[0].A != pod || pairs[0].B != svc {
		t.Fatalf("default pairs of a one-mode run: %+v, %v (want the ebpf service cell against the pod cell)", pairs, err)
	}
	f.Cells = []*results.Cell{pod}
	if _, err := Select(f, nil, ""); err == nil || !strings.Contains(err.Error(), "--cells A,B") {
		t.Errorf("a run of one cell: %v", err)
	}
}

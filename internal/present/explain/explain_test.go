package explain

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// testdata/r.json: `run --modes host,veth-routed,macvlan --tests tcp_rr
// --repeat 3 --duration 2s --profile` on this machine, its folded stacks in
// testdata/r.profile (gzipped), profiles summarised with the current rules.
func loadRun(t *testing.T) *results.File {
	t.Helper()
	f, err := results.Read("testdata/r.json")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func cell(t *testing.T, f *results.File, mode string) *results.Cell {
	t.Helper()
	for _, c := range f.Cells {
		if c.Mode == mode {
			return c
		}
	}
	t.Fatalf("no cell %s", mode)
	return nil
}

func TestCompareRecorded(t *testing.T) {
	f := loadRun(t)
	veth, mac := cell(t, f, "veth-routed"), cell(t, f, "macvlan")
	e, err := Compare(mac, veth)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Write(&out, e); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if !strings.HasPrefix(e.Sentence, "veth-routed spends ") || !strings.Contains(e.Sentence, "than macvlan") {
		t.Errorf("sentence: %s", e.Sentence)
	}
	var routing StageDiff
	for _, d := range e.Stages {
		if d.Stage == "routing" {
			routing = d
		}
	}
	if !routing.Significant || routing.Delta <= 0 {
		t.Errorf("veth-routed's routing/forwarding over macvlan's: %+v", routing)
	}
	var fwd bool
	for _, f := range e.OnlyB {
		fwd = fwd || f.Name == "ip_forward"
	}
	if !fwd {
		t.Errorf("ip_forward not listed as veth-routed's only: %+v", e.OnlyB)
	}
	if ev, ok := e.event(profile.EventFibLookup); !ok || ev.B < 1 || ev.A > 0.01 {
		t.Errorf("fib lookups per transaction: %+v", ev)
	}
	// The sentence names stages only with their table delta, and only
	// those beyond sampling noise.
	if !strings.Contains(e.Sentence, "routing/forwarding") {
		t.Errorf("sentence does not name routing/forwarding: %s", e.Sentence)
	}
	for _, d := range e.Stages {
		named := strings.Contains(e.Sentence, " µs "+d.Name+" ") || strings.Contains(e.Sentence, " µs "+d.Name+",") || strings.Contains(e.Sentence, " µs "+d.Name+".")
		if named && !d.Significant {
			t.Errorf("sentence names %s, within sampling noise (z %.1f): %s", d.Name, d.Z, e.Sentence)
		}
		if named && !strings.Contains(e.Sentence, fmt.Sprintf("%+.2f µs %s", d.Delta, d.Name)) {
			t.Errorf("sentence names %s without its delta %+.2f: %s", d.Name, d.Delta, e.Sentence)
		}
	}
	if want := fmt.Sprintf("(%.2f vs %.2f µs", e.TotalB, e.TotalA); !strings.Contains(e.Sentence, want) {
		t.Errorf("sentence lacks the totals %q: %s", want, e.Sentence)
	}
}

func TestCompareNeedsProfiles(t *testing.T) {
	a := &results.Cell{Mode: "host", Test: "tcp_rr"}
	b := cell(t, loadRun(t), "macvlan")
	if _, err := Compare(a, b); err == nil || !strings.Contains(err.Error(), "--profile") {
		t.Errorf("Compare without a profile: %v", err)
	}
}

func TestSelect(t *testing.T) {
	f := loadRun(t)
	pairs, err := Select(f, nil, "")
	if err != nil || len(pairs) != 2 || pairs[0].A.Mode != "host" || pairs[0].B.Mode != "veth-routed" || pairs[1].B.Mode != "macvlan" {
		t.Fatalf("default pairs: %v %v", pairs, err)
	}
	pairs, err = Select(f, []string{"macvlan", "veth-routed|pod||tcp_rr"}, "tcp_rr")
	if err != nil || len(pairs) != 1 || pairs[0].A.Mode != "macvlan" || pairs[0].B.Mode != "veth-routed" {
		t.Fatalf("--cells macvlan,veth-routed|pod||tcp_rr: %v %v", pairs, err)
	}
	for _, bad := range [][]string{{"macvlan", "ovs"}, {"macvlan"}} {
		if _, err := Select(f, bad, ""); err == nil {
			t.Errorf("Select(%v) accepted", bad)
		}
	}
	if _, err := Select(f, nil, "udp_rr"); err == nil {
		t.Error("Select of an absent test accepted")
	}
}

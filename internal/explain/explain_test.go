package explain

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/profile"
	"github.com/vnetlab/vnetlab/internal/results"
)

// recordedCell is a tcp_rr cell made from a profile recorded on this
// machine (internal/profile/testdata).
func recordedCell(t *testing.T, mode string, rate float64) *results.Cell {
	t.Helper()
	b, err := os.ReadFile("../profile/testdata/tcp_rr-" + mode + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		profile.Profile
		Transactions float64 `json:"transactions"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &results.Cell{Mode: mode, Path: "pod", Test: "tcp_rr", Unit: "trans/s", Median: rate,
		Profile: profile.Summarize(&r.Profile, profile.DefaultRules, r.Transactions, "transaction")}
}

func TestCompareRecorded(t *testing.T) {
	veth := recordedCell(t, "veth-routed", 35660)
	mac := recordedCell(t, "macvlan", 60670)
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
	if ev, ok := e.event(profile.EventFibLookup); !ok || ev.B < 1 || ev.A != 0 {
		t.Errorf("fib lookups per transaction: %+v", ev)
	}
	// Every number in the sentence is one of the explanation's.
	if !strings.Contains(e.Sentence, "routing/forwarding") {
		t.Errorf("sentence does not name routing/forwarding: %s", e.Sentence)
	}
}

func TestCompareNeedsProfiles(t *testing.T) {
	a := &results.Cell{Mode: "host", Test: "tcp_rr"}
	b := recordedCell(t, "macvlan", 1)
	if _, err := Compare(a, b); err == nil || !strings.Contains(err.Error(), "--profile") {
		t.Errorf("Compare without a profile: %v", err)
	}
}

func TestSelect(t *testing.T) {
	f := &results.File{Cells: []*results.Cell{recordedCell(t, "veth-routed", 1), recordedCell(t, "macvlan", 1), recordedCell(t, "bridge", 1)}}
	pairs, err := Select(f, nil, "")
	if err != nil || len(pairs) != 2 || pairs[0].A.Mode != "veth-routed" || pairs[1].B.Mode != "bridge" {
		t.Fatalf("default pairs: %v %v", pairs, err)
	}
	pairs, err = Select(f, []string{"macvlan", "bridge"}, "tcp_rr")
	if err != nil || len(pairs) != 1 || pairs[0].A.Mode != "macvlan" {
		t.Fatalf("--cells macvlan,bridge: %v %v", pairs, err)
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

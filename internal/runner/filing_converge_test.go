package runner

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/results"
)

// The EndpointSlice controller's changes are recorded as their share:
// the count with those not seen, and the quantiles of those seen.
func TestFilingConvergeController(t *testing.T) {
	c := ConvergenceOf(&converge.Run{Controller: &converge.ControllerChanges{LatencyUS: []int64{30000, 10000, 20000}, NotApplied: 2}}, t.Logf)
	if got := c.Controller; got == nil || got.Changes != 5 || got.NotApplied != 2 || got.P50.Value != 20000 || got.MaxUS != 30000 {
		t.Errorf("controller share %+v: want 5 changes, 2 not seen, p50 20 ms, max 30 ms", got)
	}
	if c := ConvergenceOf(&converge.Run{}, t.Logf); c.Controller != nil || c.Scale != nil || c.CRR != nil || c.OtherWork != nil || c.ProxySyncs != nil {
		t.Errorf("a run without a cluster's parts recorded %+v", c)
	}
}

// A file's change read back as measured (Reanalyze) is the change the run
// measured, every field.
func TestFilingConvergeChangeReadBack(t *testing.T) {
	ch := filled[converge.Change]()
	if back := measuredChange(changesOf([]converge.Change{ch})[0]); !reflect.DeepEqual(back, ch) {
		t.Errorf("read back as %+v, measured %+v", back, ch)
	}
}

// A stored file analysed again is the file ConvergenceOf recorded when it
// was measured (the same analysis: --reanalyze on a file of this version
// changes nothing), the deletion's latency from the start of the last
// unanswered run.
func TestReanalyzeAsFiled(t *testing.T) {
	seen := converge.NewSeen()
	w := int64(1e12)
	for _, n := range []string{"n2", "n1"} {
		var lines []byte
		for _, tr := range []converge.Transition{
			{Sent: w - 5e6, Answer: converge.Refused}, {Sent: w + 3e6, Answer: "a"}, // created
			{Sent: w + 1e9 + 2e6, Answer: converge.Silent}, {Sent: w + 1e9 + 4e6, Answer: "a"}, {Sent: w + 1e9 + 9e6, Answer: converge.Refused}, // deleted, flapping
		} {
			tr.Node, tr.Target = n, "t"
			b, err := json.Marshal(tr)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(append(lines, b...), '\n')
		}
		seen.Read(bytes.NewReader(lines))
	}
	changes := []converge.Change{
		{Kind: converge.KindServiceCreated, Target: "t", Shows: converge.ShowsAny, Written: w, WriteUS: 2000},
		{Kind: converge.KindServiceDeleted, Target: "t", Shows: converge.ShowsNone, Written: w + 1e9, WriteUS: 1000},
	}
	r := &converge.Run{End: time.Unix(0, w+2e9), IntervalUS: 1000}
	converge.Finish(r, changes, seen)
	c := ConvergenceOf(r, t.Logf)
	if d := c.Changes[1].LatencyUS["n1"]; d != 9000 || len(c.Rows) != 6 {
		t.Errorf("the deletion on n1: %d µs, want 9000 (the start of the last unanswered run); %d rows, want 6", d, len(c.Rows))
	}
	want, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var again results.Convergence
	if err := json.Unmarshal(want, &again); err != nil {
		t.Fatal(err)
	}
	again.Rows, again.Changes[1].LatencyUS = nil, nil
	Reanalyze(&again)
	if got, _ := json.Marshal(&again); string(got) != string(want) {
		t.Errorf("reanalysed:\n%s\nwant as filed:\n%s", got, want)
	}
}

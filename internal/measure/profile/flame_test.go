package profile

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

func TestOutputsOfARecordedProfile(t *testing.T) {
	r := loadRecorded(t, "tcp_rr-veth-routed")
	usPer := 1e6 / float64(r.Hz) / r.Transactions

	var svg bytes.Buffer
	if err := WriteFlameGraph(&svg, &r.Profile, DefaultRules, FlameOptions{Title: "veth-routed tcp_rr", USPerSample: usPer, Unit: "transaction"}); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg.Bytes(), new(struct{})); err != nil {
		t.Fatalf("flame graph is not well-formed XML: %v", err)
	}
	for _, want := range []string{"<title>ip_forward: ", "µs/transaction", "[routing/forwarding]"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("flame graph lacks %q", want)
		}
	}
	if strings.Contains(svg.String(), "<script") {
		t.Error("flame graph has a script")
	}
	if strings.Contains(svg.String(), ">compile<") || strings.Contains(svg.String(), "[user compile]") {
		t.Error("flame graph shows other processes' samples")
	}

	base := loadRecorded(t, "tcp_rr-macvlan")
	var diff bytes.Buffer
	if err := WriteFlameGraph(&diff, &r.Profile, DefaultRules, FlameOptions{USPerSample: usPer, Unit: "transaction",
		Base: &base.Profile, BaseUSPerSample: 1e6 / float64(base.Hz) / base.Transactions, BaseTitle: "macvlan"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(diff.String(), "macvlan 0.00 µs/transaction") {
		t.Error("differential flame graph: no frame absent from the base (ip_forward should be)")
	}

	var pb bytes.Buffer
	if err := WritePprof(&pb, &r.Profile, DefaultRules); err != nil {
		t.Fatal(err)
	}
	pp, err := profile.Parse(&pb)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range pp.Sample {
		n += s.Value[0]
	}
	if uint64(n) != r.Samples() || len(pp.Sample[0].Label["stage"]) != 1 {
		t.Errorf("pprof has %d samples (want %d), labels %v", n, r.Samples(), pp.Sample[0].Label)
	}

	var folded bytes.Buffer
	if err := WriteFolded(&folded, &r.Profile); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(folded.String(), "\n"); lines != len(r.Stacks) {
		t.Errorf("folded: %d lines for %d stacks", lines, len(r.Stacks))
	}
	if !strings.Contains(folded.String(), ";ip_forward") {
		t.Error("folded stacks lack ip_forward")
	}
}

func TestFoldedRoundTrip(t *testing.T) {
	r := loadRecorded(t, "tcp_rr-bridge")
	var b bytes.Buffer
	if err := WriteFolded(&b, &r.Profile); err != nil {
		t.Fatal(err)
	}
	q, err := ReadFolded(&b, r.Hz)
	if err != nil {
		t.Fatal(err)
	}
	q.Compact()
	r.Compact()
	if q.Samples() != r.Samples() || len(q.Stacks) != len(r.Stacks) {
		t.Fatalf("round trip: %d samples in %d stacks, want %d in %d", q.Samples(), len(q.Stacks), r.Samples(), len(r.Stacks))
	}
	a := Summarize(&r.Profile, DefaultRules, 1000, "transaction")
	c := Summarize(q, DefaultRules, 1000, "transaction")
	for _, st := range a.Stages {
		if stageOf(c, st.Stage).Samples != st.Samples {
			t.Errorf("stage %s: %d samples after the round trip, %d before", st.Stage, stageOf(c, st.Stage).Samples, st.Samples)
		}
	}
}

func TestFileName(t *testing.T) {
	for key, want := range map[string]string{
		"veth-routed|pod||tcp_rr":                     "veth-routed_pod_tcp_rr",
		"veth-routed|service|iptables|tcp_crr|+10000": "veth-routed_service_iptables_tcp_crr_+10000",
	} {
		if got := FileName(key); got != want {
			t.Errorf("FileName(%q) = %q, want %q", key, got, want)
		}
	}
}

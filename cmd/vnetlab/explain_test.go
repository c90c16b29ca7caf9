package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// explain on a real profiled run (internal/present/explain/testdata): the default
// pairs against the baseline, a differential flame graph, JSON, and
// one-line errors for bad input.
func TestExplainVerb(t *testing.T) {
	bin := vnetlabBin(t)
	data := filepath.Join("..", "..", "internal", "present", "explain", "testdata", "r.json")
	out, errOut, code := runVnetlab(t, bin, "explain", data)
	if code != 0 || !strings.Contains(out, "veth-routed spends ") || !strings.Contains(out, "macvlan spends ") {
		t.Fatalf("explain: code %d\n%s\n%s", code, out, errOut)
	}
	svg := filepath.Join(t.TempDir(), "diff.svg")
	out, errOut, code = runVnetlab(t, bin, "explain", data, "--cells", "macvlan,veth-routed", "--flamegraph", svg)
	if code != 0 {
		t.Fatalf("explain --flamegraph: code %d\n%s\n%s", code, out, errOut)
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(b), "veth-routed vs macvlan") || !strings.Contains(string(b), "<title>ip_forward: ") {
		t.Errorf("differential flame graph: %v, %d bytes", err, len(b))
	}
	if out, _, code = runVnetlab(t, bin, "explain", data, "-o", "json"); code != 0 || !strings.HasPrefix(out, "[") {
		t.Errorf("explain -o json: code %d: %.100s", code, out)
	}
	for _, bad := range [][]string{
		{"explain", data, "--cells", "macvlan"},
		{"explain", data, "--test", "udp_rr"},
		{"explain", data, "--flamegraph", filepath.Join(t.TempDir(), "x.svg")}, // two pairs: which one?
		{"explain", "does-not-exist.json"},
		{"explain", data, "--family"}, // an IPv4-only run
		{"explain", data, "--family", "--knob", "mtu"},
	} {
		_, errOut, code := runVnetlab(t, bin, bad...)
		if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: code %d, want a one-line error: %q", bad, code, errOut)
		}
	}
}

package results

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/vocab/field/fieldtest"
)

// A results file as report, compare, history and export read it, of every
// schema version (the golden files seed it): refused with one line naming
// the file, or read, then written as Write writes it, read and written
// again the same; every cell's accessors answer.
func FuzzParse(f *testing.F) {
	goldens, _ := filepath.Glob("testdata/schema-v*.golden.json")
	if len(goldens) < SchemaVersion {
		f.Fatalf("%d golden files, want one per schema version (%d)", len(goldens), SchemaVersion)
	}
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{`{"schema_version": 1}`, `{"schema_version": 7}`, `{"schema_version": 0}`, `[]`,
		`{"schema_version": 3, "metadata": {"cluster": {"cni": "flannel"}, "clusters": [{}]}}`, `{"schema_version": 1e400}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse("r.json", b)
		if err != nil {
			if r != nil {
				t.Fatalf("refused (%v) and yet read", err)
			}
			fieldtest.OneLine(t, err)
			if !strings.HasPrefix(err.Error(), "r.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if r.SchemaVersion < 1 || r.SchemaVersion > SchemaVersion {
			t.Fatalf("schema_version %d read", r.SchemaVersion)
		}
		out, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatalf("written back: %v", err)
		}
		r2, err := Parse("r.json", out)
		if err != nil {
			t.Fatalf("written back, refused: %v\n%s", err, out)
		}
		if out2, err := json.MarshalIndent(r2, "", "  "); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("round trip differs:\n%s\n%s", out, out2)
		}
		r.CountedInWindows()
		for _, c := range r.Cells {
			if c == nil {
				continue
			}
			_ = c.ID().String()
			_ = c.PodID().Key()
			c.Values()
			c.Comparisons()
			r.PolicyLabProviderOf(c)
		}
	})
}

// A convergence file as kube converge-report reads it: the same, for its
// one version.
func FuzzParseConvergence(f *testing.F) {
	for _, s := range []string{
		`{"convergence_version": 1, "proxy": "vnetlab-ebpf", "start": "2026-11-25T03:00:00Z", "end": "2026-11-25T03:10:00.5+01:00", "probe_interval_us": 1000,
		  "pause": "50ms-250ms", "changes": [{"seq": 0, "kind": "service-created", "target": "10.96.0.1:53", "written": 1764039600000000000, "write_us": 900,
		  "shows": "b1", "latency_us": {"n1": 900, "n2": 1200}}, {"seq": 1, "kind": "endpoint-added", "target": "10.96.0.1:53", "latency_us": {"n1": 800}, "not_applied": ["n2"]}],
		  "transitions": [{"node": "n1", "target": "10.96.0.1:53", "sent": 1, "seq": 2, "answer": "b1", "event": "open"}],
		  "rows": [{"kind": "endpoint-added", "node": "n1", "changes": 1, "not_applied": 0, "p50_us": {"value": 800, "ci": [700, 900]}, "p90_us": {"value": 800},
		  "p99_us": {"value": 800}, "max_us": 800, "conns_held": 1, "conns_broken": 0, "metric_p50_us": {"value": 500}}],
		  "scale": {"services": 1000, "endpoints": 1}, "newest_crr": {"rates": [1000, 1010]}, "other_work": {"phases": {"changes": 0.5}, "samples": [], "read_seconds": 0.01}}`,
		`{"convergence_version": 1, "cluster": {"name": "k", "cni": "vnetlab veth-routed + host-local"}, "proxy": "unknown proxy", "policy_provider": "ebpf", "policies": 100, "ipblocks": 16}`,
		`{"convergence_version": 0}`, `{"convergence_version": 2}`, `{}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConvergence("c.json", b)
		if err != nil {
			if c != nil {
				t.Fatalf("refused (%v) and yet read", err)
			}
			fieldtest.OneLine(t, err)
			if !strings.HasPrefix(err.Error(), "c.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if c.ConvergenceVersion != ConvergenceVersion {
			t.Fatalf("convergence_version %d read", c.ConvergenceVersion)
		}
		out, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatalf("written back: %v", err)
		}
		c2, err := ParseConvergence("c.json", out)
		if err != nil {
			t.Fatalf("written back, refused: %v\n%s", err, out)
		}
		if out2, err := json.MarshalIndent(c2, "", "  "); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("round trip differs:\n%s\n%s", out, out2)
		}
		if c.OtherWork != nil {
			c.OtherWork.ChangesSeconds()
		}
	})
}

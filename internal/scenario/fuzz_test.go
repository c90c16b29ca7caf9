package scenario

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/kube/bench"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/vocab/field/fieldtest"
)

// A scenario file (`run -f`, `up -f`, `kube run -f`; the repository's
// scenarios seed it): refused with one line naming the file, or read the
// same way twice, with every value the resolvers take unchecked ("checked
// by Parse") valid, and resolved into a run, a lab or a cluster run
// without a panic, a refusal being one line.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../../scenarios/*.yaml")
	if len(files) == 0 {
		f.Fatal("no scenarios/*.yaml to seed the corpus")
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{"", "mode: bridge\npods: 3\n", "modes: [veth-routed, {name: b, mode: bridge, options: {bridge_nf_call_iptables: \"off\"}}]\n",
		"mode: veth-routed\npods: [{name: pod-a, ip: 192.168.10.10}]\nstreams: 4\nsweep: {mtu: [default, 9000], gso+gro: [65536]}\n",
		"kube: {cluster: k, clusters: [{name: a, cni: vnetlab}]}\n", "mode: bridge\nprovider: iptables\nservices: [{service: 10.96.0.100:80, backends: [pod-a]}]\n",
		"extra_services: [0, 1000]\n", "mode: warp\n", "pods: -1\n", "{unknown: 1}\n", "- a\n", "mode: [\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse("s.yaml", b)
		if err != nil {
			if s != nil {
				t.Fatalf("refused (%v) and yet read", err)
			}
			fieldtest.OneLine(t, err)
			if !strings.HasPrefix(err.Error(), "s.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		s2, err := Parse("s.yaml", b)
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("read twice, differs: %v", err)
		}
		if s.CPUAffinity != "" {
			if _, err := cpupin.Parse(s.CPUAffinity); err != nil {
				t.Fatalf("cpu_affinity %q passed: %v", s.CPUAffinity, err)
			}
		}
		if s.Precision != "" {
			if _, err := runner.ParseShare(s.Precision); err != nil {
				t.Fatalf("precision %q passed: %v", s.Precision, err)
			}
		}
		if s.MaxTime != "" {
			if _, err := time.ParseDuration(s.MaxTime); err != nil {
				t.Fatalf("max_time %q passed: %v", s.MaxTime, err)
			}
		}
		for n, v := range s.Knobs {
			if err := knob.CheckValue(n, v); err != nil {
				t.Fatalf("%s: %q passed: %v", n, v, err)
			}
		}
		if err := s.Sweep.Check(); err != nil {
			t.Fatalf("sweep passed: %v", err)
		}
		if s.IsKube() {
			if _, err := s.BenchSpec(bench.DefaultSpec()); err != nil {
				fieldtest.OneLine(t, err)
			}
			return
		}
		s.RunSpec(runner.DefaultSpec())
		l, err := s.LabSpec(DefaultLab())
		if err != nil {
			fieldtest.OneLine(t, err)
			return
		}
		if err := l.Validate(); err != nil {
			fieldtest.OneLine(t, err)
		}
	})
}

package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/runner"
)

func TestParseFull(t *testing.T) {
	s, err := Parse("full.yaml", []byte(`
description: seed 002 podIP row
name: lab1
modes:
  - veth-routed
  - {name: bridge-nf-off, mode: bridge, options: {bridge_nf_call_iptables: "off"}}
pods:
  - {name: pod-a, ip: 192.168.10.10}
  - {name: pod-b, ip: 192.168.10.11}
tests: [tcp_stream]
duration: 2s
repeat: 4
profile: true
profile_dir: prof
`))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Profile || s.ProfileDir != "prof" {
		t.Errorf("profile: %v, profile_dir %q", s.Profile, s.ProfileDir)
	}
	if len(s.Modes) != 2 || s.Modes[1].Label != "bridge-nf-off" || s.Modes[1].Mode != "bridge" || s.Modes[1].Options["bridge_nf_call_iptables"] != "off" {
		t.Errorf("modes: %+v", s.Modes)
	}
	if len(s.Pods) != 2 || s.Pods[1].IP != "192.168.10.11" || *s.Repeat != 4 || s.DurationValue(0).Seconds() != 2 {
		t.Errorf("parsed: %+v", s)
	}
}

// cpu_affinity takes what --cpu-affinity takes, a bare number too.
func TestCPUAffinity(t *testing.T) {
	for body, want := range map[string]string{"cpu_affinity: 1": "1", "cpu_affinity: 0,1": "0,1", `cpu_affinity: "none"`: "none", "repeat: 3": "auto"} {
		s, err := Parse("a.yaml", []byte("mode: bridge\n"+body+"\n"))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := s.RunSpec(runner.DefaultSpec()).CPUAffinity.String(); got != want {
			t.Errorf("%s: cpu affinity %q, want %q", body, got, want)
		}
	}
}

// The rounds' keys reach the run's spec: order, its seed, a precision
// target, its time and a duet.
func TestRoundKeys(t *testing.T) {
	s, err := Parse("r.yaml", []byte("modes: [veth-routed, bridge]\norder: fixed\norder_seed: 7\nprecision: 2%\nmax_time: 3m\nduet: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec := s.RunSpec(runner.DefaultSpec())
	if spec.Order != runner.OrderFixed || spec.OrderSeed != 7 || spec.Summary.Precision != 0.02 || spec.MaxTime != 3*time.Minute || !spec.Duet {
		t.Errorf("order %q seed %d precision %g max time %s duet %v", spec.Order, spec.OrderSeed, spec.Summary.Precision, spec.MaxTime, spec.Duet)
	}
}

func TestPodCount(t *testing.T) {
	s, err := Parse("c.yaml", []byte("mode: bridge\npods: 7\n"))
	if err != nil || s.PodCount == nil || *s.PodCount != 7 {
		t.Fatalf("pods: 7 -> %v, %v", s, err)
	}
}

// Every validation error names the file, the line and the field.
func TestErrorsNameLineAndField(t *testing.T) {
	cases := []struct{ body, want string }{
		{"mode: bridge\npods: [\n", "x.yaml:"},
		{"mode: bridge\nrepeet: 3\n", `x.yaml:2: unknown field "repeet"`},
		{"name: a\n\nmode: warp\n", `x.yaml:3: field mode: unknown mode "warp"`},
		{"modes:\n  - bridge\n  - warp\n", `x.yaml:3: field modes[1]: unknown mode "warp"`},
		{"modes:\n  - {mode: bridge, nf: off}\n", `x.yaml:2: field modes[0]: unknown field "nf"`},
		{"mode: bridge\ntests: [tcp_stream, tcp_nope]\n", `x.yaml:2: field tests[1]: unknown test "tcp_nope"`},
		{"mode: bridge\nduration: fast\n", `x.yaml:2: field duration: "fast" is not a duration`},
		{"mode: bridge\nrepeat: 0\n", `x.yaml:2: field repeat: 0 is below the minimum 1`},
		{"mode: bridge\npods: -2\n", `x.yaml:2: field pods: pod count -2 is negative`},
		{"mode: bridge\npods:\n  - {name: pod-a}\n", `x.yaml:3: field pods[0]: both name and ip are required`},
		{"mode: bridge\nname: this-name-is-too-long\n", `x.yaml:2: field name: lab name "this-name-is-too-long" is 21 characters`},
		{"mode: bridge\nrepeat: many\n", `x.yaml:2: cannot unmarshal`},
		{"", "x.yaml: empty scenario file"},
		{"mode: bridge\ncpu_affinity: 0,1,2\n", `x.yaml:2: field cpu_affinity: --cpu-affinity "0,1,2": give one CPU`},
		{"mode: bridge\nprecision: 200%\n", `x.yaml:2: field precision: "200%" is not a share between 0 and 100%`},
		{"mode: bridge\nprecision: tight\n", `x.yaml:2: field precision: "tight" is not a share`},
		{"mode: bridge\nmax_time: long\n", `x.yaml:2: field max_time: "long" is not a duration`},
		{"mode: bridge\norder: sorted\n", `x.yaml:2: field order: unknown order "sorted": use random or fixed`},
	}
	for _, c := range cases {
		_, err := Parse("x.yaml", []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.body, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error spans lines: %q", c.body, err)
		}
	}
}

// The example scenarios shipped in scenarios/ all parse.
func TestShippedScenariosParse(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/*.yaml")
	if len(files) == 0 {
		t.Fatal("no scenarios found")
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%v", err)
		}
	}
	if _, err := Load("no-such-file.yaml"); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("missing file: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// The shipped scenarios name options their modes take, with valid values,
// and only cross-host modes where they ask for two nodes: a typo there would
// otherwise surface only minutes into a run.
func TestShippedScenariosModeOptions(t *testing.T) {
	files, _ := filepath.Glob("../../scenarios/*.yaml")
	for _, f := range files {
		s, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, mv := range s.Modes {
			m, err := modes.Get(mv.Mode)
			if err != nil {
				t.Fatal(err)
			}
			if s.Nodes != nil && *s.Nodes > 1 {
				if !m.CrossHost {
					t.Errorf("%s: mode %s is same-host only but the scenario has nodes: %d", f, mv.Mode, *s.Nodes)
				}
			}
			for k, v := range mv.Options {
				if err := checkOption(m, k, v); err != nil {
					t.Errorf("%s: %s: %v", f, mv.Label, err)
				}
			}
		}
	}
}

func checkOption(m modes.Mode, k, v string) error {
	if opt, ok := m.Option(k); ok {
		if opt.Check == nil {
			return nil
		}
		return opt.Check(v)
	}
	return fmt.Errorf("mode %s has no option %q", m.Name, k)
}

package main

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/scenario"
)

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func resolveRun(t *testing.T, args ...string) (runner.Spec, string, error) {
	t.Helper()
	r := newRunFlags(runner.DefaultSpec(), "", "")
	f := pflag.NewFlagSet("run", pflag.ContinueOnError)
	r.register(f)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	return r.resolve(f)
}

// No flags, no file: the defaults, from runner.DefaultSpec only.
func TestRunDefaults(t *testing.T) {
	spec, out, err := resolveRun(t)
	if err != nil {
		t.Fatal(err)
	}
	if want := runner.DefaultSpec(); !reflect.DeepEqual(spec, want) || out != "" {
		t.Errorf("plain run resolved to\n%+v\nwant\n%+v (output %q)", spec, want, out)
	}
}

// The file overrides the defaults, every flag given overrides the file,
// and --option reaches every mode over the file's options.
func TestRunFileThenFlags(t *testing.T) {
	file := writeScenario(t, `
modes:
  - veth-routed
  - {name: bridge-nf-off, mode: bridge, options: {bridge_nf_call_iptables: "off"}}
pods:
  - {name: pod-a, ip: 10.1.0.10}
  - {name: pod-b, ip: 10.1.0.11}
pod_cidr: 10.1.0.0/24
tests: [tcp_rr]
repeat: 3
duration: 2s
output: from-file.json
`)
	spec, out, err := resolveRun(t, "-f", file, "--repeat", "7", "--option", "x=1", "-o", "flag.json")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Repeat != 7 || spec.Duration.String() != "2s" || out != "flag.json" || spec.PodCIDR != "10.1.0.0/24" || len(spec.Pods) != 2 {
		t.Errorf("repeat %d duration %s output %q cidr %s pods %v", spec.Repeat, spec.Duration, out, spec.PodCIDR, spec.Pods)
	}
	if !reflect.DeepEqual(spec.Tests, []engine.Test{engine.TCPRR}) {
		t.Errorf("tests %v, want the file's", spec.Tests)
	}
	if len(spec.Modes) != 2 || spec.Modes[0].Options["x"] != "1" || spec.Modes[1].Options["x"] != "1" || spec.Modes[1].Options["bridge_nf_call_iptables"] != "off" {
		t.Errorf("modes %+v: want the file's, each with x=1", spec.Modes)
	}
	// --pods replaces the file's pod list by a count.
	spec, _, err = resolveRun(t, "-f", file, "--pods", "5", "--modes", "host")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Pods != nil || spec.PodCount != 5 || len(spec.Modes) != 1 || spec.Modes[0].Mode != "host" {
		t.Errorf("--pods 5 --modes host: pods %v count %d modes %+v", spec.Pods, spec.PodCount, spec.Modes)
	}
}

// --cpu-affinity over the file's cpu_affinity; a bad value fails the parse.
func TestRunCPUAffinity(t *testing.T) {
	file := writeScenario(t, "mode: veth-routed\ncpu_affinity: none\n")
	spec, _, err := resolveRun(t, "-f", file)
	if err != nil || spec.CPUAffinity.String() != "none" {
		t.Errorf("file: %q %v, want none", spec.CPUAffinity, err)
	}
	spec, _, err = resolveRun(t, "-f", file, "--cpu-affinity", "0,1")
	if err != nil || spec.CPUAffinity.String() != "0,1" {
		t.Errorf("flag over file: %q %v, want 0,1", spec.CPUAffinity, err)
	}
	r := newRunFlags(runner.DefaultSpec(), "", "")
	f := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.SetOutput(io.Discard)
	r.register(f)
	if err := f.Parse([]string{"--cpu-affinity", "one"}); err == nil || !strings.Contains(err.Error(), `"one" is not a CPU number`) {
		t.Errorf("--cpu-affinity one: %v", err)
	}
}

func TestRunBadFlags(t *testing.T) {
	for args, want := range map[string]string{
		"--tests tcp_nope":          `unknown test "tcp_nope"`,
		"--providers nftables":      "add it with --paths pod,service",
		"--option nokey":            "want key=value",
		"--extra-services 99999999": "want 0 to",
	} {
		_, _, err := resolveRun(t, strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", args, err, want)
		}
	}
}

func resolveUp(t *testing.T, args ...string) (string, error) {
	t.Helper()
	u := &upFlags{lab: scenario.DefaultLab(), output: "table"}
	f := pflag.NewFlagSet("up", pflag.ContinueOnError)
	u.register(f)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	want, err := u.resolve(f)
	if err != nil {
		return "", err
	}
	var pods []string
	for _, p := range want.Spec.Pods {
		pods = append(pods, p.Name+"="+p.IP)
	}
	return strings.Join([]string{want.Spec.Name, want.Spec.Mode, want.Spec.PodCIDR, strings.Join(pods, ","), want.Provider}, " "), nil
}

func TestUpFileThenFlags(t *testing.T) {
	got, err := resolveUp(t, "--mode", "bridge")
	if err != nil || got != "lab bridge 192.168.10.0/24 pod-a=192.168.10.10,pod-b=192.168.10.11 " {
		t.Errorf("up --mode bridge: %q, %v", got, err)
	}
	file := writeScenario(t, "name: f\nmodes: [macvlan]\npod_cidr: 10.2.0.0/24\npods: 3\nprovider: nftables\n")
	got, err = resolveUp(t, "-f", file, "--pod-cidr", "10.3.0.0/24", "--name", "g")
	if err != nil || got != "g macvlan 10.3.0.0/24 pod-a=10.3.0.10,pod-b=10.3.0.11,pod-c=10.3.0.12 nftables" {
		t.Errorf("up -f with flags: %q, %v", got, err)
	}
	for body, want := range map[string]string{
		"modes: [bridge, macvlan]\n":                "`up` builds one lab",
		"mode: bridge\nextra_services: [0, 1000]\n": "give one number",
	} {
		if _, err := resolveUp(t, "-f", writeScenario(t, body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", body, err, want)
		}
	}
	if _, err := resolveUp(t, "--mode", "bridge", "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "want table or json") {
		t.Errorf("up -o yaml: %v", err)
	}
	if _, err := resolveUp(t); err == nil || !strings.Contains(err.Error(), "no mode given") {
		t.Errorf("up without a mode: %v", err)
	}
}

// --profile puts the stacks beside the results (r.json -> r.profile);
// --profile-dir implies --profile; a scenario's profile: true does too.
func TestRunProfileFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		dir  string
	}{
		{[]string{"--profile", "-o", "out/r.json"}, "out/r.profile"},
		{[]string{"--profile"}, "vnetlab-profile"},
		{[]string{"--profile-dir", "p", "-o", "r.json"}, "p"},
		{[]string{"-f", writeScenario(t, "profile: true\noutput: s.json\n")}, "s.profile"},
	} {
		spec, _, err := resolveRun(t, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if !spec.Profile || spec.ProfileDir != c.dir {
			t.Errorf("%v: profile %v, dir %q; want on, %q", c.args, spec.Profile, spec.ProfileDir, c.dir)
		}
	}
	if spec, _, _ := resolveRun(t, "-o", "r.json"); spec.Profile || spec.ProfileDir != "" {
		t.Errorf("without --profile: profile %v, dir %q", spec.Profile, spec.ProfileDir)
	}
}

// A field's bad value is named as the user gave it: the file's key when
// the file set it, the flag when the command line did (or nobody did).
func TestRunErrorsNameTheInput(t *testing.T) {
	file := writeScenario(t, "mode: veth-routed\nduration: 500ms\nproviders: [nftables]\n")
	if _, _, err := resolveRun(t, "-f", file); err == nil || !strings.Contains(err.Error(), "duration ("+file+") 500ms is too short") {
		t.Errorf("from the file: %v", err)
	}
	if _, _, err := resolveRun(t, "-f", file, "--duration", "200ms"); err == nil || !strings.Contains(err.Error(), "--duration 200ms is too short") {
		t.Errorf("from the flag: %v", err)
	}
	if _, _, err := resolveRun(t, "-f", file, "--duration", "2s"); err == nil || !strings.Contains(err.Error(), "add it with --paths pod,service") {
		t.Errorf("a field the file does not set: %v", err)
	}
}

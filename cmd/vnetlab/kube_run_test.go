package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/kube/bench"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/runner"
)

// kubeRun is what a kube run resolved to, as these tests look at it.
type kubeRun struct {
	cf                              clusterFlags
	opts                            measure.Options
	spec                            runner.Spec
	out, reportDir, scenario, label string
	table                           []bench.Config
}

func resolveKubeRun(t *testing.T, args ...string) (*kubeRun, error) {
	t.Helper()
	r := newKubeRunFlags(bench.DefaultSpec(), "", "")
	cmd := &cobra.Command{}
	r.register(cmd)
	f := cmd.Flags()
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	s, err := r.resolve(f)
	if err != nil {
		return nil, err
	}
	return &kubeRun{cf: clusterFlags{cluster: s.Cluster.Local, kubeconfig: s.Cluster.Kubeconfig, context: s.Cluster.Context},
		opts: s.Pods, spec: s.Measure, out: r.out, reportDir: r.reportDir, scenario: r.file, label: s.Label, table: s.Configs}, nil
}

// No file: the flags' defaults (every path and placement, runner.DefaultSpec).
func TestKubeRunDefaults(t *testing.T) {
	k, err := resolveKubeRun(t, "--cluster", "k")
	if err != nil {
		t.Fatal(err)
	}
	def := runner.DefaultSpec()
	if k.cf.cluster != "k" || !slices.Equal(k.opts.Paths, measure.Paths) || !slices.Equal(k.opts.Placements, measure.Placements) ||
		k.spec.Repeat != def.Repeat || k.spec.Duration != def.Duration || !slices.Equal(k.spec.Tests, def.Tests) || k.out != "" ||
		k.opts.ReadyTimeout != measure.DefaultReadyTimeout {
		t.Errorf("defaults: %+v", k)
	}
}

// The file says everything; each flag given overrides its part of it.
func TestKubeRunFileThenFlags(t *testing.T) {
	file := writeScenario(t, `
tests: [tcp_rr]
repeat: 3
duration: 2s
output: file.json
report: file-report
kube:
  cluster: k
  paths: [pod, service]
  placements: [cross-node]
  nodes: [n1, n2]
  image: reg/img:1
  label: lab-cluster
  ready_timeout: 40s
`)
	k, err := resolveKubeRun(t, "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	if k.cf.cluster != "k" || !slices.Equal(k.opts.Paths, []string{"pod", "service"}) || !slices.Equal(k.opts.Placements, []string{"cross-node"}) ||
		!slices.Equal(k.opts.Nodes, []string{"n1", "n2"}) || k.opts.Image != "reg/img:1" || k.label != "lab-cluster" ||
		k.spec.Repeat != 3 || k.spec.Duration != 2*time.Second || !slices.Equal(k.spec.Tests, []engine.Test{engine.TCPRR}) ||
		k.out != "file.json" || k.reportDir != "file-report" || k.scenario != file || k.opts.ReadyTimeout != 40*time.Second {
		t.Errorf("from the file: %+v", k)
	}
	k, err = resolveKubeRun(t, "-f", file, "--kubeconfig", "/kc", "--context", "prod", "--paths", "host", "--placements", "same-node",
		"--nodes", "a", "--image", "other:2", "--label", "prod", "--tests", "tcp_crr", "--repeat", "7", "--duration", "1s", "-o", "x.json", "--report", "r", "--ready-timeout", "5s", "--cpu-affinity", "1")
	if err != nil {
		t.Fatal(err)
	}
	if k.cf.cluster != "" || k.cf.kubeconfig != "/kc" || k.cf.context != "prod" || !slices.Equal(k.opts.Paths, []string{"host"}) ||
		!slices.Equal(k.opts.Placements, []string{"same-node"}) || !slices.Equal(k.opts.Nodes, []string{"a"}) || k.opts.Image != "other:2" ||
		k.label != "prod" || k.spec.Repeat != 7 || k.spec.Duration != time.Second || !slices.Equal(k.spec.Tests, []engine.Test{engine.TCPCRR}) ||
		k.out != "x.json" || k.reportDir != "r" || k.opts.ReadyTimeout != 5*time.Second || k.spec.CPUAffinity.String() != "1" {
		t.Errorf("flags over the file: %+v", k)
	}
}

// Wrong kind of file, bad values: one line naming the problem.
func TestKubeRunFileErrors(t *testing.T) {
	lab := writeScenario(t, "modes: [bridge]\n")
	if _, err := resolveKubeRun(t, "-f", lab); err == nil || !strings.Contains(err.Error(), "has no kube: section") {
		t.Errorf("lab file: %v", err)
	}
	bad := writeScenario(t, "kube:\n  cluster: k\n  placements: [far]\n")
	if _, err := resolveKubeRun(t, "-f", bad); err == nil || !strings.Contains(err.Error(), "field kube.placements[0]: unknown placement") {
		t.Errorf("bad placement: %v", err)
	}
	if _, err := resolveKubeRun(t, "--cluster", "k", "--tests", "tcp_nope"); err == nil || !strings.Contains(err.Error(), "tcp_nope") {
		t.Errorf("bad test: %v", err)
	}
	kube := writeScenario(t, "kube: {cluster: k}\n")
	r := newRunFlags(runner.DefaultSpec(), "", "")
	f := pflag.NewFlagSet("run", pflag.ContinueOnError)
	r.register(f)
	if err := f.Parse([]string{"-f", kube}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.resolve(f); err == nil || !strings.Contains(err.Error(), "vnetlab kube run -f") {
		t.Errorf("run -f of a kube file: %v", err)
	}
}

// run -f takes the file's report directory unless --report is given.
func TestRunFileReport(t *testing.T) {
	file := writeScenario(t, "modes: [bridge]\nreport: from-file\n")
	for _, c := range []struct {
		args []string
		want string
	}{{[]string{"-f", file}, "from-file"}, {[]string{"-f", file, "--report", "flag"}, "flag"}} {
		r := newRunFlags(runner.DefaultSpec(), "", "")
		f := pflag.NewFlagSet("run", pflag.ContinueOnError)
		r.register(f)
		if err := f.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.resolve(f); err != nil || r.reportDir != c.want {
			t.Errorf("%v: report dir %q, %v; want %q", c.args, r.reportDir, err, c.want)
		}
	}
}

// A file with kube.clusters brings up its own clusters: the flags that name
// one cluster are refused with it; measurement flags still override it.
func TestKubeRunTableFlags(t *testing.T) {
	file := writeScenario(t, `
tests: [tcp_crr]
repeat: 2
kube:
  paths: [pod, service]
  clusters:
    - {name: ipt, proxy: iptables}
    - {name: nft, proxy: nftables, extra_services: 10}
`)
	k, err := resolveKubeRun(t, "-f", file, "--repeat", "4")
	if err != nil {
		t.Fatal(err)
	}
	if len(k.table) != 2 || k.spec.Repeat != 4 || k.table[1].Extra != 10 {
		t.Errorf("table run: %+v", k)
	}
	for _, flag := range [][]string{{"--cluster", "k"}, {"--kubeconfig", "/x"}, {"--nodes", "a,b"}, {"--label", "x"}} {
		_, err := resolveKubeRun(t, append([]string{"-f", file}, flag...)...)
		if err == nil || !strings.Contains(err.Error(), flag[0]+": "+file+" names its clusters in kube.clusters") {
			t.Errorf("%v with a table file: %v", flag, err)
		}
	}
}

// --tolerance and kube.tolerance: a ratio in (0, 1), refused in one line
// otherwise, and only with both the pod and the host path measured.
func TestKubeRunTolerance(t *testing.T) {
	resolve := func(args ...string) (bench.Spec, error) {
		r := newKubeRunFlags(bench.DefaultSpec(), "", "")
		cmd := &cobra.Command{}
		r.register(cmd)
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		return r.resolve(cmd.Flags())
	}
	if s, err := resolve("--cluster", "k", "--tolerance", "0.1"); err != nil || s.Tolerance != 0.1 {
		t.Errorf("--tolerance 0.1: %v, %v", s.Tolerance, err)
	}
	file := writeScenario(t, "kube:\n  cluster: k\n  tolerance: 0.25\n")
	if s, err := resolve("-f", file); err != nil || s.Tolerance != 0.25 {
		t.Errorf("kube.tolerance 0.25: %v, %v", s.Tolerance, err)
	}
	if s, err := resolve("-f", file, "--tolerance", "0.05"); err != nil || s.Tolerance != 0.05 {
		t.Errorf("--tolerance over the file's: %v, %v", s.Tolerance, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster", "k", "--tolerance", "1.5"}, "--tolerance 1.5: want a ratio between 0 and 1"},
		{[]string{"--cluster", "k", "--tolerance", "0"}, "--tolerance 0: want a ratio between 0 and 1"},
		{[]string{"--cluster", "k", "--tolerance", "-0.2"}, "--tolerance -0.2: want a ratio between 0 and 1"},
		{[]string{"--cluster", "k", "--tolerance", "0.1", "--paths", "pod,service"}, "measure both (--paths pod,host)"},
		{[]string{"-f", writeScenario(t, "kube:\n  cluster: k\n  tolerance: 2\n")}, ":3: field kube.tolerance: 2: want a ratio between 0 and 1"},
	} {
		_, err := resolve(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", tc.args, err, tc.want)
		}
	}
}

// --profile on kube run: only a local cluster's nodes are this machine's
// CPUs; --profile-dir implies it, and the files go beside -o by default.
func TestKubeRunProfile(t *testing.T) {
	k, err := resolveKubeRun(t, "--cluster", "k", "--profile", "-o", "out/k.json")
	if err != nil || !k.spec.Profile || k.spec.ProfileDir != "out/k.profile" {
		t.Errorf("--cluster k --profile -o out/k.json: profile %v in %q, %v; want true in out/k.profile", k.spec.Profile, k.spec.ProfileDir, err)
	}
	if k, err = resolveKubeRun(t, "--cluster", "k", "--profile-dir", "p"); err != nil || !k.spec.Profile || k.spec.ProfileDir != "p" {
		t.Errorf("--profile-dir p: %+v, %v", k, err)
	}
	if k, err = resolveKubeRun(t, "--cluster", "k"); err != nil || k.spec.Profile {
		t.Errorf("no --profile: %+v, %v", k, err)
	}
	_, err = resolveKubeRun(t, "--kubeconfig", "kc", "--profile")
	if err == nil || !strings.Contains(err.Error(), "--profile samples this machine's CPUs") || !strings.Contains(err.Error(), "--cluster NAME") || strings.Contains(err.Error(), "\n") {
		t.Errorf("--kubeconfig with --profile: %v, want one line naming --profile and --cluster", err)
	}
}

package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/runner"
)

// Bad knobs (issue 26) are refused in one line naming the value and the
// limit, from flags and from files, before anything is built.
func TestRunKnobBadInput(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"--sweep mtu=1500,70000", "mtu 70000 is above 65535"},
		{"--sweep size=0", "size 0 is below the minimum 1"},
		{"--sweep streams=0,1", "streams 0 is below the minimum 1"},
		{"--sweep colour=1,2", `unknown knob "colour" (knobs: size, streams, mtu`},
		{"--sweep streams=1,1", "lists 1 twice"},
		{"--sweep offload=gro:maybe", "gro"},
		{"--sweep mtu+streams=1500", "take the same values"},
		{"--sweep streams=1,2 --sweep streams=4,8", "knob streams is swept twice"},
	} {
		f := pflag.NewFlagSet("run", pflag.ContinueOnError)
		f.SetOutput(io.Discard)
		newRunFlags(runner.DefaultSpec(), "", "").register(f)
		err := f.Parse(strings.Fields(c.args))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line with %q", c.args, err, c.want)
		}
	}
	for args, want := range map[string]string{
		"--mtu 70000":   "mtu 70000 is above 65535",
		"--streams 200": "--streams 200: use 1 to 128",
		"--load 99":     "load 99 is above the maximum 64",
	} {
		_, _, err := resolveRun(t, strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	file := writeScenario(t, "modes: [bridge]\nsweep:\n  streams: [1, 2]\n  mtu: [1500, 70000]\n")
	if _, _, err := resolveRun(t, "-f", file); err == nil || !strings.Contains(err.Error(), ":4: field sweep.mtu: sweep mtu: mtu 70000 is above 65535") {
		t.Errorf("file with mtu 70000: %v", err)
	}
	if _, err := resolveKubeRun(t, "--cluster", "k", "--sweep", "mtu=1500,9000"); err == nil || !strings.Contains(err.Error(), "a cluster's links are its CNI's") {
		t.Errorf("kube run --sweep mtu: %v", err)
	}
	if _, err := resolveKubeRun(t, "--cluster", "k", "--sweep", "streams=1,4"); err != nil {
		t.Errorf("kube run --sweep streams: %v", err)
	}
}

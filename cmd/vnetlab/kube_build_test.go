package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// A name kube build does not know is refused before anything is built,
// naming the builds there are.
func TestKubeBuildOnlyRefusesAnUnknownBuild(t *testing.T) {
	err := kubeBuild(t, "--only", "coredns,kubernets")
	if err == nil || !strings.Contains(err.Error(), `--only "kubernets" is no build`) || !strings.Contains(err.Error(), "kube-router-rules") {
		t.Fatalf("err = %v, want the unknown name refused with the list of builds", err)
	}
}

// --all and --only cannot be asked together: refused before anything is
// built.
func TestKubeBuildAllOrOnly(t *testing.T) {
	err := kubeBuild(t, "--all", "--only", "coredns")
	if err == nil || !strings.Contains(err.Error(), "all") || !strings.Contains(err.Error(), "only") {
		t.Fatalf("err = %v, want --all with --only refused", err)
	}
	if entries, _ := os.ReadDir(os.Getenv("VNETLAB_KUBE_CACHE")); len(entries) > 0 {
		t.Errorf("the refused build left %d entries in the cache", len(entries))
	}
}

// kubeBuild runs kube build with args on an empty cache of the test's own.
func kubeBuild(t *testing.T, args ...string) error {
	t.Setenv("VNETLAB_KUBE_CACHE", t.TempDir())
	cmd := newKubeBuildCmd()
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	return cmd.Execute()
}

// Package e2e drives the vnetlab binary as a user would, as root, on real
// namespaces, and checks the machine is left exactly as it was found.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/system/rootns"
)

var bin string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("e2e tests need root (they build namespaces): skipped")
		os.Exit(0)
	}
	bin = os.Getenv("VNETLAB_BIN")
	if bin == "" {
		dir, err := os.MkdirTemp("", "vnetlab-e2e")
		if err != nil {
			panic(err)
		}
		bin = filepath.Join(dir, "vnetlab")
		_, file, _, _ := runtime.Caller(0)
		out, err := exec.Command("go", "build", "-o", bin, filepath.Join(filepath.Dir(file), "..", "cmd", "vnetlab")).CombinedOutput()
		if err != nil {
			fmt.Printf("build vnetlab: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	if os.Getenv(layoutCaseEnv) != "" {
		// A case of TestNetnsLayouts, over a /run of its own: the parent
		// process compares the root namespace.
		os.Exit(m.Run())
	}
	before := rootns.Snapshot()
	code := m.Run()
	after := rootns.Snapshot()
	if d := rootns.Diff(before, after); d != "" {
		fmt.Printf("FAIL: the root namespace changed during the e2e tests:\n%s\n", d)
		code = 1
	}
	os.Exit(code)
}

// result of one vnetlab invocation.
type result struct {
	stdout, stderr string
	code           int
}

func vnetlab(t *testing.T, args ...string) result {
	t.Helper()
	return vnetlabEnv(t, nil, args...)
}

func vnetlabEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := result{stdout: o.String(), stderr: e.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("vnetlab %v: %v", args, err)
	}
	return r
}

// must runs vnetlab and fails the test on a non-zero exit.
func must(t *testing.T, args ...string) result {
	t.Helper()
	r := vnetlab(t, args...)
	if r.code != 0 {
		t.Fatalf("vnetlab %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// up brings a lab up and registers its removal, also when the test fails.
func up(t *testing.T, name string, args ...string) {
	t.Helper()
	must(t, append([]string{"up", "--name", name}, args...)...)
	t.Cleanup(func() {
		if _, err := os.Stat("/run/vnetlab/labs/" + name); err == nil {
			vnetlab(t, "down", name)
		}
	})
}

// labNamespaces lists namespaces of a lab still present under /run/netns.
func labNamespaces(name string) []string { return namespacesWithPrefix("vnl-" + name + "-") }

func namespacesWithPrefix(prefix string) []string {
	ents, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func assertGone(t *testing.T, name string) {
	t.Helper()
	if ns := labNamespaces(name); len(ns) > 0 {
		t.Errorf("lab %s left namespaces: %v", name, ns)
	}
	if _, err := os.Stat("/run/vnetlab/labs/" + name); err == nil {
		t.Errorf("lab %s left its state directory", name)
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

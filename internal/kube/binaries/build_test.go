package binaries

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Two processes (here two goroutines, each with its own open of the lock
// file) ensuring one version at once: one builds, the other waits and
// finds its build; neither removes the other's bin.building under it.
func TestEnsureOneBuildAtATime(t *testing.T) {
	dir := t.TempDir()
	m := testModule(dir, map[string][]byte{
		"go.mod":  []byte("module example.com/hello\n\ngo 1.22\n"),
		"main.go": []byte("package main\n\nfunc main() { println(\"hello\") }\n"),
	})
	var wg sync.WaitGroup
	bins := make([]string, 3)
	errs := make([]error, 3)
	var mu sync.Mutex
	var said []string
	say := func(f string, a ...any) { mu.Lock(); said = append(said, f); mu.Unlock() }
	for i := range bins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bins[i], errs[i] = m.ensure(context.Background(), say)
		}()
	}
	wg.Wait()
	for i := range bins {
		if errs[i] != nil {
			t.Fatalf("ensure %d: %v (said: %q)", i, errs[i], said)
		}
		if bins[i] != filepath.Join(dir, "bin") {
			t.Errorf("ensure %d returned %q, want %q", i, bins[i], filepath.Join(dir, "bin"))
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "bin", "hello")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("the built command: %v", err)
	}
	builds := 0
	for _, s := range said {
		if s == "built %s in %s (%s of CPU)" {
			builds++
		}
	}
	if builds != 1 {
		t.Errorf("%d builds, want 1 (the others wait and find it): %q", builds, said)
	}
}

// A module go cannot fetch (the Go module proxy unreachable, nothing in
// the module cache) fails the build in one line that says what it needs.
func TestEnsureWithoutTheModuleProxy(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GOPROXY", "http://127.0.0.1:9") // nothing listens on the discard port
	t.Setenv("GOMODCACHE", filepath.Join(dir, "modcache"))
	t.Setenv("GOFLAGS", "-modcacherw")
	t.Setenv("GOSUMDB", "off")
	m := testModule(filepath.Join(dir, "build"), map[string][]byte{
		"go.mod":  []byte("module example.com/hello\n\ngo 1.22\n\nrequire example.com/absent v1.0.0\n"),
		"main.go": []byte("package main\n\nimport _ \"example.com/absent\"\n\nfunc main() {}\n"),
	})
	_, err := m.ensure(context.Background(), func(string, ...any) {})
	if err == nil {
		t.Fatal("the build succeeded without its module")
	}
	msg := err.Error()
	t.Log(msg)
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "needs its Go modules") || !strings.Contains(msg, "127.0.0.1:9") {
		t.Fatalf("want one line saying the build needs the module proxy, got:\n%s", msg)
	}
}

// The rules program links the kube-router release the clusters run: both
// modules require it at KubeRouterVersion.
func TestKubeRouterRulesVersion(t *testing.T) {
	for name, mod := range map[string][]byte{"kuberouter.mod": kubeRouterMod, "kuberouterrules.mod": kubeRouterRulesMod} {
		if !bytes.Contains(mod, []byte("\t"+kubeRouterPkg+" "+KubeRouterVersion)) {
			t.Errorf("%s does not require %s %s", name, kubeRouterPkg, KubeRouterVersion)
		}
	}
}

// A module's build tags reach the compiler, what go build wrote is renamed
// to the outputs' names, and the after step's data files are in bin and
// count for the cache, executable or not: a bin without them is built again.
func TestEnsureTagsNamesAndAfter(t *testing.T) {
	dir := t.TempDir()
	m := testModule(dir, map[string][]byte{
		"go.mod":         []byte("module example.com/hello\n\ngo 1.22\n"),
		"daemon/main.go": []byte("//go:build withtag\n\npackage main\n\nfunc main() { println(\"tagged\") }\n"),
		"daemon/doc.go":  []byte("// Package main builds only with withtag.\npackage main\n"),
	})
	m.pkgs, m.outputs, m.afterFiles = []string{"./daemon"}, []string{"agent"}, []string{"lib/data.txt"}
	m.tags, m.names = "osusergo,withtag", map[string]string{"daemon": "agent"}
	m.after = func(_ context.Context, _, src, tmp string) error {
		if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(tmp, "lib"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(tmp, "lib", "data.txt"), []byte("x"), 0o644)
	}
	bin, err := m.ensure(context.Background(), func(string, ...any) {})
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(bin, "agent")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("the renamed command: %v", err)
	}
	if _, err := os.Stat(filepath.Join(bin, "daemon")); !os.IsNotExist(err) {
		t.Errorf("go build's own name is still there: %v", err)
	}
	if m.cached() != bin {
		t.Fatal("a bin with every output and the after step's data file does not count as cached")
	}
	if err := os.Remove(filepath.Join(bin, "lib", "data.txt")); err != nil {
		t.Fatal(err)
	}
	if m.cached() != "" {
		t.Error("a bin without the after step's file counts as cached")
	}
}

// The Cilium pin requires its release and repeats the release's replace
// directives, which a dependency's go.mod does not apply.
func TestCiliumPin(t *testing.T) {
	for _, want := range []string{
		"\t" + ciliumPkg + " " + CiliumVersion + " ",
		"replace sigs.k8s.io/controller-tools => github.com/cilium/controller-tools ",
		"replace github.com/osrg/gobgp/v3 => github.com/cilium/gobgp/v3 ",
	} {
		if !bytes.Contains(ciliumMod, []byte(want)) {
			t.Errorf("cilium.mod lacks %q", want)
		}
	}
	if !bytes.Contains(ciliumSum, []byte("github.com/cilium/gobgp/v3 v3.0.0-20260130142103-27e5da2a39e6 h1:")) {
		t.Error("cilium.sum lacks the gobgp fork's hash, which no checksum database holds")
	}
}

// testModule is a module of files in dir whose one package "." builds the
// command hello.
func testModule(dir string, files map[string][]byte) module {
	return module{what: "a test command", dir: dir, files: files, pkgs: []string{"."}, outputs: []string{"hello"},
		ldflags: "-s -w", estimate: "a second"}
}

// Package vnetlab holds the test that keeps the code's layers: the table in
// docs/architecture.md says which layer every package is in, and a package
// may import only packages of its own layer or below.
package vnetlab

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/vnetlab/vnetlab/"

// layer is one row of the table: its name, its rank (0 is the top) and
// its packages.
type layer struct {
	name     string
	rank     int
	packages []string
}

// backticked are the `code` spans of a table cell.
var backticked = regexp.MustCompile("`([^`]+)`")

// readLayers reads the layers table of docs/architecture.md: each row's
// second cell names its packages in backticks (cmd/..., internal/...,
// tools/..., with {a,b} for several under one folder).
func readLayers(t *testing.T) []layer {
	t.Helper()
	f, err := os.Open("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []layer
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Layers"
		case in && strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| layer |"):
			cells := strings.Split(line, "|")
			if len(cells) < 4 {
				continue
			}
			l := layer{name: strings.TrimSpace(cells[1]), rank: len(out)}
			for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
				l.packages = append(l.packages, expand(m[1])...)
			}
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/architecture.md has no layers table under ## Layers")
	}
	return out
}

// expand spells out a path with one {a,b,...} part; paths that name no
// package folder (bpf/, file names) are dropped.
func expand(p string) []string {
	if !strings.HasPrefix(p, "cmd/") && !strings.HasPrefix(p, "internal/") && !strings.HasPrefix(p, "tools/") {
		return nil
	}
	open, end := strings.Index(p, "{"), strings.Index(p, "}")
	if open < 0 || end < open {
		return []string{strings.TrimSuffix(p, "/")}
	}
	var out []string
	for _, part := range strings.Split(p[open+1:end], ",") {
		out = append(out, p[:open]+part+p[end+1:])
	}
	return out
}

// imports lists each package of cmd/, internal/ and tools/ with the
// packages of this module it imports (tests' imports not counted).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./cmd/...", "./internal/...", "./tools/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		m[pkg] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				m[pkg] = append(m[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	return m
}

// Every package is in the table once, and imports nothing of a layer above
// its own.
func TestLayers(t *testing.T) {
	layers := readLayers(t)
	of := map[string]layer{}
	for _, l := range layers {
		for _, p := range l.packages {
			if prev, ok := of[p]; ok {
				t.Errorf("docs/architecture.md puts %s in two layers: %s and %s", p, prev.name, l.name)
			}
			of[p] = l
		}
	}
	deps := imports(t)
	for p := range of {
		if _, ok := deps[p]; !ok {
			t.Errorf("docs/architecture.md's layer %q lists %s, which is no package", of[p].name, p)
		}
	}
	for p, imps := range deps {
		l, ok := of[p]
		if !ok {
			t.Errorf("package %s is in no layer of docs/architecture.md's table: add it to the row it belongs to", p)
			continue
		}
		for _, imp := range imps {
			if il, ok := of[imp]; ok && il.rank < l.rank {
				t.Errorf("%s (layer %s) imports %s (layer %s, above it): move the code, or the package, so that imports point down", p, l.name, imp, il.name)
			}
		}
	}
}

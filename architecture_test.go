// Package vnetlab holds the test that keeps the code's layers: the table in
// docs/architecture.md says which layer every package is in, and a package
// and its tests may import only packages of its own layer or below (within
// the platforms layer, only those its row lists after it).
package vnetlab

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
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
// packages of this module it imports, and those its tests import (in
// package and in package _test) beside them.
func imports(t *testing.T) (code, tests map[string][]string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`, "./cmd/...", "./internal/...", "./tools/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	code, tests = map[string][]string{}, map[string][]string{}
	ours := func(list string) []string {
		var m []string
		for _, imp := range strings.Fields(list) {
			if strings.HasPrefix(imp, module) {
				m = append(m, strings.TrimPrefix(imp, module))
			}
		}
		return m
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		pkg := strings.TrimPrefix(f[0], module)
		code[pkg], tests[pkg] = ours(f[1]), ours(f[2])
	}
	return code, tests
}

// testsMayImport are the imports a package's tests may make beyond what
// the package may, by importing package ("": any): a lab, the fixture of a
// data path's, an engine's or a workflow's test, and the table a runner's
// end-to-end test reads of the run it made.
var testsMayImport = map[string][]string{
	"":                {"internal/platform/lab", "internal/platform/testnet"},
	"internal/runner": {"internal/present/report"},
}

// orderedLayer is the layer whose row lists its packages in order too,
// top to bottom: each imports only packages of its row listed after it.
const orderedLayer = "platforms"

// Every package is in the table once, and neither it nor its tests
// import anything of a layer above its own, or of its own row listed
// before it where the row is ordered.
func TestLayers(t *testing.T) {
	layers := readLayers(t)
	of := map[string]layer{}
	at := map[string]int{} // a package's place in its row
	for _, l := range layers {
		for i, p := range l.packages {
			if prev, ok := of[p]; ok {
				t.Errorf("docs/architecture.md puts %s in two layers: %s and %s", p, prev.name, l.name)
			}
			of[p], at[p] = l, i
		}
	}
	code, tests := imports(t)
	for p := range of {
		if _, ok := code[p]; !ok {
			t.Errorf("docs/architecture.md's layer %q lists %s, which is no package", of[p].name, p)
		}
	}
	for p, imps := range code {
		l, ok := of[p]
		if !ok {
			t.Errorf("package %s is in no layer of docs/architecture.md's table: add it to the row it belongs to", p)
			continue
		}
		for _, src := range []struct {
			who  string
			imps []string
		}{{p, imps}, {p + "'s tests", tests[p]}} {
			for _, imp := range src.imps {
				il, ok := of[imp]
				switch {
				case !ok || imp == p:
				case src.who != p && (slices.Contains(testsMayImport[""], imp) || slices.Contains(testsMayImport[p], imp)):
				case il.rank < l.rank:
					t.Errorf("%s (layer %s) imports %s (layer %s, above it): move the code, or the package, so that imports point down", src.who, l.name, imp, il.name)
				case il.rank == l.rank && l.name == orderedLayer && at[imp] < at[p]:
					t.Errorf("%s imports %s, listed before it in docs/architecture.md's %s row, which is in order (each imports only those after it): move %s after %s in the row, or the code", src.who, imp, l.name, p, imp)
				}
			}
		}
	}
	if !slices.ContainsFunc(layers, func(l layer) bool { return l.name == orderedLayer }) {
		t.Errorf("docs/architecture.md's table has no layer %q, whose order this test checks", orderedLayer)
	}
}

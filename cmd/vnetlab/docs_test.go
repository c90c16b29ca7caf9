package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The project speaks of itself: no issue or stop numbers and no dates in
// its reference docs, its code comments, its help or what it writes into a
// user's files. Dated measurements live in docs/measurements/, named by
// their date. docs/ is a reference: a page per topic, at most maxDocLines
// lines each, all of them indexed by docs/README.md.

// maxDocLines: a docs page above this covers more than one topic.
const maxDocLines = 400

// repoRoot is the repository's root, seen from cmd/vnetlab.
const repoRoot = "../.."

var (
	// issueRef is "issue 12", "Issue #12", "stop 54": a tracker's or a
	// session's number, which a reader of the project does not have.
	issueRef = regexp.MustCompile(`(?i)\b(issue|stop)s?\s+#?[0-9]+`)
	// issueRefEnd is a line ending in "issue" or "stop", and numberLead a
	// line starting with a number after a comment's or a quote's leader:
	// one reference broken over two lines.
	issueRefEnd = regexp.MustCompile(`(?i)\b(issue|stop)s?\s*#?$`)
	numberLead  = regexp.MustCompile(`^\s*(//|#|\*|>)?\s*#?[0-9]+\b`)
	// isoDate is a calendar date, YYYY-MM-DD.
	isoDate = regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2}\b`)
)

// historyFindings says what of line speaks of history rather than of the
// product: issue or stop numbers, and dates. Not dates: Go's reference
// layout (2006-01-02), RFC 3339 timestamps (a date followed by T and a
// time: values in test data and example output), and the date in the name
// of a page under docs/measurements/, which is how a reference page links
// the measurement it quotes.
func historyFindings(line string) []string {
	var found []string
	for _, m := range issueRef.FindAllString(line, -1) {
		found = append(found, fmt.Sprintf("%q (an issue or stop number: say what is meant)", m))
	}
	for _, ix := range isoDate.FindAllStringIndex(line, -1) {
		d, after := line[ix[0]:ix[1]], line[ix[1]:]
		before := line[:ix[0]]
		switch {
		case d == "2006-01-02":
		case len(after) >= 2 && after[0] == 'T' && after[1] >= '0' && after[1] <= '9':
		case strings.HasSuffix(before, "measurements/"):
		default:
			found = append(found, fmt.Sprintf("%q (a date: dated material belongs in docs/measurements/)", d))
		}
	}
	return found
}

// The matcher itself: what it flags and what it lets through.
func TestHistoryFindings(t *testing.T) {
	for line, want := range map[string]int{
		"// The knobs (issue 12): streams, MTU":                         1,
		"# Issue 12's table":                                            1,
		"see issue #7 and stop 54":                                      2,
		"measured 2026-11-23 on this machine":                           1,
		"(2026-11-27 evening, issue 47)":                                2,
		"// Package knob is the vocabulary of the knobs users turn":     0,
		`const dateFormat = "2006-01-02 15:04"`:                         0,
		`ProxySince: "2026-11-29T10:00:00Z"`:                            0,
		"[the table](measurements/2026-11-28-converge-table-n0-30k.md)": 0,
		"an issue with the stop signal; tissue 3":                       0,
		"a stop 5 s later":                                              1, // reword: "5 s after the stop"
	} {
		if got := historyFindings(line); len(got) != want {
			t.Errorf("%q: %d findings %v, want %d", line, len(got), got, want)
		}
	}
}

// historyScanned says whether path (relative to the root) is one the rule
// covers: reference docs and the README, and the non-generated source and
// scripts of the product (code comments, help text, scenario files, the
// end-to-end tests, the Makefile). Not docs/measurements/, testdata (recorded data and golden
// files), nor compiled or generated files.
func historyScanned(rel string) bool {
	rel = filepath.ToSlash(rel)
	switch {
	case rel == "README.md" || rel == "Makefile":
		return true
	case rel == "cmd/vnetlab/docs_test.go":
		return false // this file: its cases are the rule's examples
	case strings.HasPrefix(rel, "docs/"):
		return !strings.HasPrefix(rel, "docs/measurements/") && strings.HasSuffix(rel, ".md")
	}
	top, _, _ := strings.Cut(rel, "/")
	switch top {
	case "internal", "cmd", "bpf", "scripts", "tools", "scenarios", "e2e":
	default:
		return false
	}
	if strings.Contains(rel, "/testdata/") {
		return false
	}
	switch filepath.Ext(rel) {
	case ".go", ".c", ".h", ".sh", ".yaml", ".yml", ".md", ".tmpl":
		return true
	}
	return false
}

// generated says whether a file declares itself generated (Go's convention).
func generated(b []byte) bool {
	head := b
	if len(head) > 2048 {
		head = head[:2048]
	}
	return bytes.Contains(head, []byte("Code generated")) && bytes.Contains(head, []byte("DO NOT EDIT"))
}

// historyProblems walks root and returns file:line: finding for every line
// the rule covers that names an issue, a stop or a date.
func historyProblems(t *testing.T, root string) []string {
	var problems []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !historyScanned(rel) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated(b) {
			return nil
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
		prev := ""
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			for _, f := range historyFindings(line) {
				problems = append(problems, fmt.Sprintf("%s:%d: %s", filepath.ToSlash(rel), n, f))
			}
			if issueRefEnd.MatchString(prev) && numberLead.MatchString(line) {
				problems = append(problems, fmt.Sprintf("%s:%d: an issue or stop number broken over this line and the next: say what is meant", filepath.ToSlash(rel), n-1))
			}
			prev = line
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

// No issue or stop number and no date outside docs/measurements/.
func TestNoHistoryOutsideMeasurements(t *testing.T) {
	if _, err := os.Stat(filepath.Join(repoRoot, "docs", "README.md")); err != nil {
		t.Fatalf("not at the repository's root: %v", err)
	}
	for _, p := range historyProblems(t, repoRoot) {
		t.Error(p)
	}
}

// The walk finds a planted line, in a copy of the rule's scope, and names
// its file and line.
func TestNoHistoryFindsPlanted(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"docs/ok.md":                        "# A page\n\nNothing dated.\n",
		"docs/measurements/2026-11-28-x.md": "Measured 2026-11-28 (issue 12).\n",
		"internal/x/x.go":                   "package x\n\n// The knobs (issue 12): streams.\n",
		"internal/x/testdata/r.json":        `{"start": "2026-11-21 04:59"}`,
		"internal/x/gen_bpfel.go":           "// Code generated by bpf2go; DO NOT EDIT.\n// issue 12\n",
		"internal/x/y.go":                   "package x\n\n// A removal stalled them (issue\n// 47: p99 90 ms). Until they stop\n// for good.\n",
		"Makefile":                          "# Benchmark: the table.\nall:\n",
	}
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := historyProblems(t, root)
	slices.Sort(got)
	if len(got) != 2 || !strings.HasPrefix(got[0], "internal/x/x.go:3: ") || !strings.Contains(got[0], "issue 12") ||
		!strings.HasPrefix(got[1], "internal/x/y.go:3: ") || !strings.Contains(got[1], "broken over") {
		t.Errorf("found %q, want only internal/x/x.go:3 naming issue 12 and internal/x/y.go:3's issue broken over two lines", got)
	}
}

// Each docs page covers one topic in at most maxDocLines lines, and
// docs/README.md links every page and every measurement.
func TestDocsAreAnIndexedReference(t *testing.T) {
	docs := filepath.Join(repoRoot, "docs")
	index, err := os.ReadFile(filepath.Join(docs, "README.md"))
	if err != nil {
		t.Fatalf("docs/README.md, the index: %v", err)
	}
	pages, _ := filepath.Glob(filepath.Join(docs, "*.md"))
	measurements, _ := filepath.Glob(filepath.Join(docs, "measurements", "*.md"))
	if len(pages) < 10 || len(measurements) == 0 {
		t.Fatalf("found %d pages and %d measurements under %s", len(pages), len(measurements), docs)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		if n := bytes.Count(b, []byte("\n")); n > maxDocLines {
			t.Errorf("docs/%s has %d lines, above %d: split it by topic, dated runs to docs/measurements/", name, n, maxDocLines)
		}
		if name != "README.md" && !bytes.Contains(index, []byte("]("+name+")")) {
			t.Errorf("docs/README.md does not link docs/%s", name)
		}
	}
	dated := regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}-[a-z0-9-]+\.md$`)
	for _, p := range measurements {
		name := filepath.Base(p)
		if !dated.MatchString(name) {
			t.Errorf("docs/measurements/%s: name it YYYY-MM-DD-topic.md, by the day it was measured", name)
		}
		if !bytes.Contains(index, []byte("](measurements/"+name+")")) {
			t.Errorf("docs/README.md does not link docs/measurements/%s", name)
		}
	}
}

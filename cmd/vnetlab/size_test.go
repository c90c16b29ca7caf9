package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxCmdLines: cmd holds flags, a call into a package and printing, one
// verb per file (docs/architecture.md); a file above this has grown
// workflow or several verbs, and is split by concern.
const maxCmdLines = 200

// Every non-test .go file of cmd/vnetlab has at most maxCmdLines lines.
func TestCmdFilesShort(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no .go files here: %v", err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(b, []byte("\n")); n > maxCmdLines {
			t.Errorf("cmd/vnetlab/%s has %d lines, above %d: split it by concern (docs/architecture.md)", name, n, maxCmdLines)
		}
	}
}

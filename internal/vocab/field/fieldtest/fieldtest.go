// Package fieldtest holds the check that tests of bad input share: what
// vnetlab says of bad input is one line, never empty.
package fieldtest

import (
	"strings"
	"testing"
)

// OneLine fails t unless err's message is one non-empty line.
func OneLine(t testing.TB, err error) {
	t.Helper()
	if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("error is not one line: %q", msg)
	}
}

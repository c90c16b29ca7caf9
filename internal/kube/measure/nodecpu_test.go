package measure

import (
	"bytes"
	"strings"
	"testing"
)

// The agent answers one line per line asked, each a snapshot of this
// machine with its boot id, and stops at the end of its input.
func TestCPUAgentAnswersEachLine(t *testing.T) {
	var out bytes.Buffer
	if err := ServeCPUAgent(strings.NewReader("\n\n"), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d answers to 2 questions: %q", len(lines), out.String())
	}
	a, err := ParseAgentLine(lines[0])
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ParseAgentLine(lines[1])
	if a.BootID != localBootID() || a.User+a.System == 0 || b.User+b.System+b.Idle < a.User+a.System+a.Idle {
		t.Fatalf("answers %+v then %+v: want this machine's growing counters", a, b)
	}
	if _, err := ParseAgentLine(`{"user":1}`); err == nil {
		t.Error("an answer without a boot id was accepted")
	}
}

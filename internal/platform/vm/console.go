package vm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The guest's /init frames each test binary's `-test.v` output on the serial
// console with these markers.
const (
	MarkBegin = "VNETLAB-GUEST-BEGIN"
	MarkEnd   = "VNETLAB-GUEST-END"
)

// Status of one guest test.
type Status string

const (
	Pass       Status = "PASS"
	Fail       Status = "FAIL"
	Skip       Status = "SKIP"
	Incomplete Status = "INCOMPLETE" // started, never finished (panic, timeout, guest died)
)

// GuestTest is one test of a guest test binary, a subtest named with its
// parents ("TestModes/ipvlan").
type GuestTest struct {
	Name   string
	Status Status
	Output string // its lines, its subtests' included
}

// GuestRun is one test binary's run inside the guest.
type GuestRun struct {
	Name  string
	Exit  int         // the binary's exit code
	Ended bool        // the end marker was seen (the guest did not die first)
	Tests []GuestTest // in the order they started
	Log   string      // every line of its output
}

var (
	// === RUN, === NAME, === CONT, === PAUSE name
	eventLine  = regexp.MustCompile(`^=== (RUN|NAME|CONT|PAUSE)\s+(\S+)`)
	resultLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+)`)
)

// ParseConsole reads a guest's serial console: the runs between the markers
// and, in each, every test (`go test -v` output) with its result and its
// output. Lines outside the markers (kernel messages, /init's progress) are
// ignored; lines inside go to the test that last started or was named (and
// its parents).
func ParseConsole(console string) []GuestRun {
	var runs []GuestRun
	var cur *GuestRun
	var tests []*GuestTest
	byName := map[string]*GuestTest{}
	outs := map[string]*strings.Builder{}
	var log strings.Builder
	current := ""
	finish := func() {
		for _, t := range tests {
			t.Output = outs[t.Name].String()
			cur.Tests = append(cur.Tests, *t)
		}
		cur.Log = log.String()
	}
	write := func(name, line string) {
		for name != "" {
			if b, ok := outs[name]; ok {
				b.WriteString(line + "\n")
			}
			i := strings.LastIndex(name, "/")
			if i < 0 {
				break
			}
			name = name[:i]
		}
	}
	for _, line := range strings.Split(strings.ReplaceAll(console, "\r", ""), "\n") {
		trimmed := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(trimmed, MarkBegin+" "); ok {
			runs = append(runs, GuestRun{Name: strings.TrimSpace(name)})
			cur, tests, current = &runs[len(runs)-1], nil, ""
			byName, outs = map[string]*GuestTest{}, map[string]*strings.Builder{}
			log.Reset()
			continue
		}
		if cur == nil {
			continue
		}
		if rest, ok := strings.CutPrefix(trimmed, MarkEnd+" "); ok {
			cur.Ended = true
			if _, code, ok := strings.Cut(rest, "exit="); ok {
				cur.Exit, _ = strconv.Atoi(strings.TrimSpace(code))
			}
			finish()
			cur = nil
			continue
		}
		log.WriteString(line + "\n")
		if m := eventLine.FindStringSubmatch(line); m != nil {
			current = m[2]
			if m[1] == "RUN" && byName[current] == nil {
				t := &GuestTest{Name: current, Status: Incomplete}
				tests = append(tests, t)
				byName[current], outs[current] = t, &strings.Builder{}
			}
		}
		if m := resultLine.FindStringSubmatch(line); m != nil && byName[m[2]] != nil {
			byName[m[2]].Status = Status(m[1])
			write(m[2], line)
			continue
		}
		write(current, line)
	}
	if cur != nil { // the guest stopped inside a run
		finish()
	}
	return runs
}

// Problem says what is wrong with a run as a whole (nil when it ended with
// exit 0, or when its failures are all reported by tests).
func (r GuestRun) Problem() error {
	if !r.Ended {
		return fmt.Errorf("guest run %s never finished (guest crashed or timed out)", r.Name)
	}
	if r.Exit != 0 {
		for _, t := range r.Tests {
			if t.Status == Fail || t.Status == Incomplete {
				return nil
			}
		}
		return fmt.Errorf("guest run %s exited %d with no failed test", r.Name, r.Exit)
	}
	return nil
}

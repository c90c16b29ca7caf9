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

// GuestTest is one top-level test of a guest test binary.
type GuestTest struct {
	Name   string
	Status Status
	Output string // its lines, subtests included
}

// GuestRun is one test binary's run inside the guest.
type GuestRun struct {
	Name  string
	Exit  int  // the binary's exit code
	Ended bool // the end marker was seen (the guest did not die first)
	Tests []GuestTest
	Log   string // every line of its output
}

var (
	runLine    = regexp.MustCompile(`^=== RUN\s+(\S+)`)
	resultLine = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+)`)
)

// ParseConsole reads a guest's serial console: the runs between the markers
// and, in each, the top-level tests with their results and output. Lines
// outside the markers (kernel messages, /init's progress) are ignored.
func ParseConsole(console string) []GuestRun {
	var runs []GuestRun
	var cur *GuestRun
	var test *GuestTest
	var log, out strings.Builder
	finishTest := func() {
		if test != nil {
			test.Output = out.String()
			cur.Tests = append(cur.Tests, *test)
			test = nil
			out.Reset()
		}
	}
	for _, line := range strings.Split(strings.ReplaceAll(console, "\r", ""), "\n") {
		trimmed := strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(trimmed, MarkBegin+" "); ok {
			runs = append(runs, GuestRun{Name: strings.TrimSpace(name)})
			cur, test = &runs[len(runs)-1], nil
			log.Reset()
			out.Reset()
			continue
		}
		if cur == nil {
			continue
		}
		if rest, ok := strings.CutPrefix(trimmed, MarkEnd+" "); ok {
			finishTest()
			cur.Ended = true
			if _, code, ok := strings.Cut(rest, "exit="); ok {
				cur.Exit, _ = strconv.Atoi(strings.TrimSpace(code))
			}
			cur.Log = log.String()
			cur = nil
			continue
		}
		log.WriteString(line + "\n")
		if m := runLine.FindStringSubmatch(line); m != nil && !strings.Contains(m[1], "/") {
			finishTest() // the previous test never reported: stays incomplete
			test = &GuestTest{Name: m[1], Status: Incomplete}
		}
		if test != nil {
			out.WriteString(line + "\n")
		}
		if m := resultLine.FindStringSubmatch(line); m != nil && test != nil && m[2] == test.Name {
			test.Status = Status(m[1])
			finishTest()
		}
	}
	if cur != nil { // the guest stopped inside a run
		finishTest()
		cur.Log = log.String()
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

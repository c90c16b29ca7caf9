package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// ginkgoReport is the part of ginkgo's JSON report (--json-report, an array
// of suites) that a run's result needs.
type ginkgoReport struct {
	SuiteSucceeded bool
	PreRunStats    struct{ TotalSpecs, SpecsThatWillRun int }
	RunTime        time.Duration
	SpecReports    []struct {
		ContainerHierarchyTexts []string
		LeafNodeType            string
		LeafNodeText            string
		State                   string
		RunTime                 time.Duration
		NumAttempts             int
		Failure                 *struct {
			Message  string
			Location struct {
				FileName   string
				LineNumber int
			}
		}
	}
}

// Spec states in ginkgo's report that end a spec without passing.
var failedStates = map[string]bool{"failed": true, "panicked": true, "interrupted": true, "aborted": true, "timedout": true}

// Outcome is what a run's report says.
type Outcome struct {
	// WillRun is how many specs the focus and skip selected, of Total.
	WillRun, Total int
	Passed         int
	// Names of the specs that ran, in the report's order.
	Ran []string
	// Failed are the specs (or suite nodes, such as a failed
	// SynchronizedBeforeSuite) that did not pass; Flaky passed only after
	// a rerun.
	Failed, Flaky []Failure
}

// Failure is one spec that did not pass (or passed on a rerun).
type Failure struct {
	Name, State, Location, Message string
	RunTime                        time.Duration
}

// ReadReport reads ginkgo's JSON report.
func ReadReport(path string) (Outcome, error) {
	f, err := os.Open(path)
	if err != nil {
		return Outcome{}, err
	}
	defer f.Close()
	o, err := parseReport(f)
	if err != nil {
		return o, fmt.Errorf("ginkgo's report %s: %w", path, err)
	}
	return o, nil
}

func parseReport(r io.Reader) (Outcome, error) {
	var suites []ginkgoReport
	if err := json.NewDecoder(r).Decode(&suites); err != nil {
		return Outcome{}, err
	}
	var o Outcome
	for _, s := range suites {
		o.WillRun += s.PreRunStats.SpecsThatWillRun
		o.Total += s.PreRunStats.TotalSpecs
		for _, sp := range s.SpecReports {
			name := strings.TrimSpace(strings.Join(append(append([]string{}, sp.ContainerHierarchyTexts...), sp.LeafNodeText), " "))
			if sp.LeafNodeType != "It" {
				name = "[" + sp.LeafNodeType + "] " + name
			}
			f := Failure{Name: strings.TrimSpace(name), State: sp.State, RunTime: sp.RunTime}
			if sp.Failure != nil {
				f.Message = firstLine(sp.Failure.Message)
				f.Location = fmt.Sprintf("%s:%d", sp.Failure.Location.FileName, sp.Failure.Location.LineNumber)
			}
			switch {
			case failedStates[sp.State]:
				o.Failed = append(o.Failed, f)
			case sp.LeafNodeType != "It" || sp.State != "passed":
				continue // suite nodes that passed, skipped and pending specs
			case sp.NumAttempts > 1:
				o.Flaky = append(o.Flaky, f)
			}
			if sp.LeafNodeType == "It" && sp.State != "skipped" && sp.State != "pending" {
				o.Ran = append(o.Ran, f.Name)
				if sp.State == "passed" {
					o.Passed++
				}
			}
		}
	}
	return o, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// summaryLine matches upstream's summary lines in ginkgo's output: "Ran 47
// of 7123 Specs in 463.201 seconds" and "SUCCESS! -- 47 Passed | 0 Failed |
// 0 Pending | 7076 Skipped" (or "FAIL! -- ...").
var summaryLine = regexp.MustCompile(`^(Ran \d+ of \d+ Specs in .*|(SUCCESS|FAIL)! -- .*)$`)

// SummaryLines returns upstream's summary lines from ginkgo's output (in
// parallel runs the CLI prints them once, for the merged report).
func SummaryLines(r io.Reader) []string {
	var lines []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(ansi.ReplaceAllString(sc.Text(), "")); summaryLine.MatchString(l) {
			lines = append(lines, l)
		}
	}
	return lines
}

// ansi matches terminal colour codes (ginkgo colours its output unless
// told not to).
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

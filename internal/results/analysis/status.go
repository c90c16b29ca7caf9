package analysis

import (
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Status is a cell's outcome, judged against the run's prediction: a cell the
// run said would fail (results.Cell.Note, e.g. iptables on a bridge with
// bridge_nf_call_iptables=off) and that has no valid sample is a result, not
// an error.
type Status int

const (
	OK                 Status = iota // valid samples, as predicted
	Failed                           // no valid sample, and none was predicted to fail
	FailedAsExpected                 // no valid sample, as the run predicted
	WorkedUnexpectedly               // predicted to fail, yet some samples are valid
	// NotApplied: a knob of the cell is not in force (the kernel refused
	// or ignored it; results.Cell.NotApplied): a result, never measured
	// as if the knob were set.
	NotApplied
)

var statusWords = []string{OK: "ok", Failed: "failed", FailedAsExpected: "failed-as-expected", WorkedUnexpectedly: "worked-unexpectedly", NotApplied: "not-applied"}

// Statuses are every status, in order: what an export lists per cell.
func Statuses() []Status {
	out := make([]Status, len(statusWords))
	for i := range out {
		out[i] = Status(i)
	}
	return out
}

// String is the status as the results file writes it (cells[].status).
func (s Status) String() string { return statusWords[s] }

// Problem says the outcome contradicts the run's prediction, so the run
// must not report success.
func (s Status) Problem() bool { return s == Failed || s == WorkedUnexpectedly }

// StatusOf judges a cell from its samples and the run's prediction.
func StatusOf(c *results.Cell) Status {
	valid := c.Valid > 0 || len(c.Values()) > 0 // a file stripped of samples keeps valid_samples
	switch {
	case c.NotApplied != "":
		return NotApplied
	case c.ExpectedToFail() && valid:
		return WorkedUnexpectedly
	case c.ExpectedToFail():
		return FailedAsExpected
	case !valid:
		return Failed
	}
	return OK
}

// Problems is nil when every cell came out as the run predicted; otherwise an
// error naming the cells that failed unexpectedly and those predicted to fail
// that worked.
func Problems(cells []*results.Cell) error {
	var failed, worked []string
	for _, c := range cells {
		switch StatusOf(c) {
		case Failed:
			failed = append(failed, c.ID().String())
		case WorkedUnexpectedly:
			worked = append(worked, c.ID().String())
		}
	}
	var parts []string
	if len(failed) > 0 {
		parts = append(parts, fmt.Sprintf("%d %s no valid sample (%s): see the errors above and in the results JSON",
			len(failed), plural(len(failed), "cell has", "cells have"), strings.Join(failed, ", ")))
	}
	if len(worked) > 0 {
		parts = append(parts, fmt.Sprintf("%d %s predicted to fail but measured (%s): the prediction in its note is wrong on this machine",
			len(worked), plural(len(worked), "cell was", "cells were"), strings.Join(worked, ", ")))
	}
	if len(parts) == 0 {
		return nil
	}
	return fmt.Errorf("%s", strings.Join(parts, "; "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

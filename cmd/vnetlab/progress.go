package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/vnetlab/vnetlab/internal/runner"
)

// newProgress picks a progress bar for a terminal and plain lines otherwise
// (CI logs, pipes), both on stderr so stdout keeps only the table.
func newProgress() runner.Progress {
	if term.IsTerminal(int(os.Stderr.Fd())) {
		return &barProgress{w: os.Stderr}
	}
	return &lineProgress{w: os.Stderr}
}

// lineProgress prints one line per sample with a simple ETA (average sample
// time so far times samples left).
type lineProgress struct {
	w     io.Writer
	total int
	begun time.Time
}

// Begin again (a precision run's further rounds) changes the total only.
func (p *lineProgress) Begin(total int) {
	if p.begun.IsZero() {
		p.begun = time.Now()
	}
	p.total = total
}

func (p *lineProgress) Sample(i int, label string) {
	eta := ""
	if done := i - 1; done > 0 {
		left := time.Since(p.begun) / time.Duration(done) * time.Duration(p.total-done)
		eta = fmt.Sprintf(" (eta %s)", left.Round(time.Second))
	}
	fmt.Fprintf(p.w, "[%d/%d] %s%s\n", i, p.total, label, eta)
}

func (p *lineProgress) Note(format string, args ...any) { fmt.Fprintf(p.w, format+"\n", args...) }
func (p *lineProgress) End()                            {}

// barProgress is one redrawn line: samples done, current cell, ETA.
type barProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (p *barProgress) Begin(total int) {
	if p.bar != nil { // a precision run's further rounds
		p.bar.ChangeMax(total)
		return
	}
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionFullWidth(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
	)
}

// Sample i is about to start: i-1 are done.
func (p *barProgress) Sample(i int, label string) {
	if p.bar == nil {
		return
	}
	p.bar.Describe(label)
	_ = p.bar.Set(i - 1)
}

// Note clears the bar, prints the line, and lets the next Sample redraw it.
func (p *barProgress) Note(format string, args ...any) {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *barProgress) End() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
}

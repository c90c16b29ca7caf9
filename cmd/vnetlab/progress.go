package main

import (
	"fmt"
	"os"
)

// lineProgress prints one line per sample (plain output, fine for CI logs).
type lineProgress struct{ total int }

func newProgress() *lineProgress { return &lineProgress{} }

func (p *lineProgress) Begin(total int) { p.total = total }
func (p *lineProgress) Sample(i int, label string) {
	fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", i, p.total, label)
}
func (p *lineProgress) Note(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (p *lineProgress) End()                            {}

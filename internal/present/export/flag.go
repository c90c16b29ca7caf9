package export

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

// Target is one --export FORMAT:FILE.
type Target struct {
	Format Format
	File   string
}

// Flag is the repeatable --export FORMAT:FILE of run, kube run, compare and
// ratio. Each value is checked when the flag is parsed (a known format, a
// file whose directory exists), so a long run never starts to fail at its
// end on a typo.
type Flag []Target

// AddFlag registers --export on fs, bound to f.
func AddFlag(fs *pflag.FlagSet, f *Flag) {
	fs.Var(f, "export", "also write the results as FORMAT:FILE, FORMAT one of "+formatList()+" (repeatable; docs/exports.md)")
}

// Set parses one FORMAT:FILE.
func (f *Flag) Set(s string) error {
	name, file, ok := strings.Cut(s, ":")
	if !ok || file == "" {
		return fmt.Errorf("%q: want FORMAT:FILE, e.g. junit:results.xml (formats: %s)", s, formatList())
	}
	format, err := ParseFormat(name)
	if err != nil {
		return err
	}
	dir := filepath.Dir(file)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s: directory %s does not exist: create it first", s, dir)
	}
	*f = append(*f, Target{Format: format, File: file})
	return nil
}

func (f *Flag) String() string { return strings.Join(f.GetSlice(), ",") }

// Type names the value in --help.
func (f *Flag) Type() string { return "FORMAT:FILE" }

// Results writes every --export of a run (run, kube run).
func (f Flag) Results(res *results.File) error {
	return f.each(func(t Target, b *bytes.Buffer) error { return Results(b, t.Format, res) })
}

// Compare writes every --export of compare; pct is --fail-on-regression
// (< 0 when not given).
func (f Flag) Compare(fd *analysis.FileDiff, pct float64) error {
	return f.verdicts(CompareVerdicts(fd, pct))
}

// Ratio writes every --export of ratio.
func (f Flag) Ratio(r *analysis.CellRatio) error {
	return f.verdicts([]Verdict{RatioVerdict(r)})
}

func (f Flag) verdicts(vs []Verdict) error {
	return f.each(func(t Target, b *bytes.Buffer) error { return Verdicts(b, t.Format, vs) })
}

// each renders every target in memory first, then writes the files: a
// format a verb cannot export fails before any file is written.
func (f Flag) each(render func(Target, *bytes.Buffer) error) error {
	out := make([]bytes.Buffer, len(f))
	for i, t := range f {
		if err := render(t, &out[i]); err != nil {
			return fmt.Errorf("--export %s:%s: %w", t.Format, t.File, err)
		}
	}
	for i, t := range f {
		if err := os.WriteFile(t.File, out[i].Bytes(), 0o644); err != nil {
			return fmt.Errorf("--export %s:%s: %w", t.Format, t.File, err)
		}
		fmt.Fprintf(os.Stderr, "%s export written to %s\n", t.Format, t.File)
	}
	return nil
}

// Append, Replace and GetSlice make Flag a pflag.SliceValue, so that a
// command that re-binds its flags (cmd/vnetlab's overlay) copies the
// targets one by one instead of re-parsing their joined String.
func (f *Flag) Append(s string) error { return f.Set(s) }

func (f *Flag) Replace(ss []string) error {
	*f = nil
	for _, s := range ss {
		if err := f.Set(s); err != nil {
			return err
		}
	}
	return nil
}

func (f *Flag) GetSlice() []string {
	var s []string
	for _, t := range *f {
		s = append(s, string(t.Format)+":"+t.File)
	}
	return s
}

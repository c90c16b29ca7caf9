package explain

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Write prints an explanation in one screen: rates, stages, events, the
// functions on one side only, and the sentence.
func Write(w io.Writer, e *Explanation) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "%s: %s vs %s — CPU µs per %s (all CPUs, %d Hz sampling; * = beyond sampling noise)\n",
		e.Test, e.B.Label, e.A.Label, e.Unit, e.B.P.Hz)
	if e.RateA > 0 {
		fmt.Fprintf(w, "rate: %s vs %s %s (%.3gx)\n", num(e.RateB), num(e.RateA), e.RateUnit, e.RateB/e.RateA)
	}
	fmt.Fprintf(tw, "stage\t%s\t%s\tdelta\t\n", e.B.Label, e.A.Label)
	for _, d := range e.Stages {
		if math.Abs(d.A) < 0.005 && math.Abs(d.B) < 0.005 {
			continue
		}
		mark := ""
		if d.Significant {
			mark = "*"
		}
		note := ""
		switch kind := e.kind(d.Stage); {
		case kind == profile.KindOverhead:
			note = "  (the profiler's own work: not counted)"
		case !profile.Counted(kind):
			note = "  (not counted)"
		}
		fmt.Fprintf(tw, "%s\t%8.2f\t%8.2f\t%+8.2f%s\t%s\n", d.Name, d.B, d.A, d.Delta, mark, note)
	}
	fmt.Fprintf(tw, "data path (counted)\t%8.2f\t%8.2f\t%+8.2f\t\n", e.TotalB, e.TotalA, e.TotalB-e.TotalA)
	if err := tw.Flush(); err != nil {
		return err
	}
	if en := e.Enforcer; en != nil {
		fmt.Fprintf(w, "NetworkPolicy enforcer (%s's stages: %s): %.2f vs %.2f µs per %s (%+.2f), %.1f%% vs %.1f%% of the data path\n",
			en.Provider, en.Stages, en.B, en.A, e.Unit, en.B-en.A, 100*en.ShareB, 100*en.ShareA)
	}
	if len(e.Events) > 0 {
		fmt.Fprintf(w, "\nevents per %s that differ:\n", e.Unit)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "event\t%s\t%s\t\n", e.B.Label, e.A.Label)
		for _, ev := range e.Events {
			fmt.Fprintf(tw, "%s\t%8s\t%8s\t\n", ev.Name, num(ev.B), num(ev.A))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, o := range []struct {
		label, other string
		fs           []OnlyFunction
	}{{e.B.Label, e.A.Label, e.OnlyB}, {e.A.Label, e.B.Label, e.OnlyA}} {
		if len(o.fs) == 0 {
			continue
		}
		var names []string
		for i, f := range o.fs {
			if i == 12 {
				names = append(names, fmt.Sprintf("... %d more", len(o.fs)-12))
				break
			}
			names = append(names, fmt.Sprintf("%s %.2f", f.Name, f.US))
		}
		fmt.Fprintf(w, "\non %s's stacks only (inclusive µs per %s; under 0.2%% of %s's samples): %s\n",
			o.label, e.Unit, o.other, strings.Join(names, ", "))
	}
	_, err := fmt.Fprintf(w, "\n%s\n", e.Sentence)
	return err
}

func num(v float64) string {
	if v == 0 {
		return "0"
	}
	if math.Abs(v) >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	if math.Abs(v) < 0.01 {
		return "<0.01"
	}
	return fmt.Sprintf("%.3g", v)
}

// kind is a stage's kind on either side.
func (e *Explanation) kind(stage string) string {
	if k := e.A.P.Stage(stage).Kind; k != "" {
		return k
	}
	return e.B.P.Stage(stage).Kind
}

package report

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// Markdown writes the report as Markdown; charts are the .svg files written
// beside it (see Write).
func Markdown(w io.Writer, d *Doc) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# %s\n\n", mdEsc(d.Title))

	p("## Run\n\n| | |\n|---|---|\n")
	for _, kv := range d.Meta {
		p("| %s | %s |\n", mdEsc(kv.Key), mdCode(kv.Value, kv.Key == "command line"))
	}
	p("\n")
	if len(d.Skipped) > 0 {
		p("Skipped:\n\n")
		for _, s := range d.Skipped {
			p("- **%s**: %s\n", mdEsc(s.Mode), mdEsc(s.Reason))
		}
		p("\n")
	}
	for _, wn := range d.Warnings {
		p("> warning: %s\n\n", mdEsc(wn))
	}

	if c := d.Configs; c != nil {
		p("## Configurations\n\nOne row per cluster configuration and placement: medians, and clusterIP/podIP as the ratio of medians with its bootstrap 95%% CI (`vnetlab ratio`). Each configuration ran on its own cluster, one after the other; with extra Services, both cells were measured in the same rounds with them present.\n\n")
		mdRow(w, slices.Clone(c.Header))
		mdRow(w, dashes(len(c.Header)))
		for _, r := range c.Rows {
			mdRow(w, slices.Clone(r))
		}
		p("\n")
	}
	for _, t := range d.Tests {
		p("## %s (%s)\n\n", t.Test, mdEsc(t.Unit))
		p("![%s](%s.svg)\n\n", t.Test, t.File)
		p("%s.\n\n", capitalize(t.Ceiling))
		head := []string{"mode", "path", "median", "95% CI", "CV", "n"}
		if t.HasCeiling {
			head = append(head, "× ceiling [95% CI]")
		}
		if t.HasBaseline {
			head = append(head, "vs baseline")
		}
		if t.HasLatency {
			head = append(head, "latency µs")
		}
		head = append(head, "notes")
		mdRow(w, head)
		mdRow(w, dashes(len(head)))
		for _, c := range t.Cells {
			row := []string{c.Mode, c.Series, c.Median, c.CI, c.CV, c.N}
			if t.HasCeiling {
				row = append(row, c.Ceiling)
			}
			if t.HasBaseline {
				row = append(row, c.Baseline)
			}
			if t.HasLatency {
				row = append(row, c.Latency)
			}
			mdRow(w, append(row, c.Notes))
		}
		p("\n%s\n\n", ciMethods(t))
	}

	markdownKnobs(w, d)
	if len(d.CPU) > 0 {
		p("## CPU cost\n\nWhole-machine CPU time during each sample, by class, per unit of work (medians over samples; lower is better).\n\n")
		for _, c := range d.CPU {
			p("### %s: CPU-seconds per %s\n\n![%s CPU cost](%s.svg)\n\n", c.Test, c.Per, c.Test, c.File)
			head := []string{"mode", "path", "user", "system", "softirq", "total"}
			head = append(head, "NET_RX softirqs per "+c.SoftirqPer)
			mdRow(w, head)
			mdRow(w, dashes(len(head)))
			for _, r := range c.Rows {
				mdRow(w, []string{r.Mode, r.Series, r.User, r.System, r.Softirq, r.Total, r.Softirqs})
			}
			p("\n")
		}
	}

	markdownProfiles(w, d.Profiles)
	p("## Beside the seeds\n\n")
	if len(d.Seeds) == 0 {
		p("%s.\n\n", capitalize(d.NoSeeds))
	}
	p("Absolute numbers differ by machine, so each seed number is shown as a ratio to the seed's own baseline, beside our ratio between the same two cells. \"agrees\" means the seed's ratio lies inside our ratio's 95%% CI (within ±5%% when we have no CI).\n\n")
	for _, s := range d.Seeds {
		p("### %s\n\n", mdEsc(s.Heading))
		p("From %s: %s (%s). %s.\n\n", mdEsc(s.Table.Article()), s.Table.Test, s.Table.Unit, mdEsc(s.Table.Setup))
		p("%s.\n\n", capitalize(s.Baseline))
		mdRow(w, []string{"seed case", "seed " + s.Table.Unit, "seed ratio", "our cell", "ours", "our ratio [95% CI]", "verdict"})
		mdRow(w, dashes(7))
		var notes []string
		for _, r := range s.Rows {
			what := r.What
			if r.Note != "" {
				notes = append(notes, fmt.Sprintf("%d. %s: %s", len(notes)+1, r.What, r.Note))
				what += fmt.Sprintf(" (%d)", len(notes))
			}
			mdRow(w, []string{what, r.SeedValue, r.SeedRatio, r.Ours, r.OurValue, r.OurRatio, r.Verdict})
		}
		p("\n")
		if s.Summary != "" {
			p("**%s.**\n\n", capitalize(s.Summary))
		}
		for _, n := range notes {
			p("%s\n", mdEsc(n))
		}
		if len(notes) > 0 {
			p("\n")
		}
	}
}

func ciMethods(t *TestView) string {
	seen := map[string]bool{}
	var m []string
	for _, c := range t.Cells {
		if c.CIMethod != "" && !seen[c.CIMethod] {
			seen[c.CIMethod] = true
			m = append(m, c.CIMethod)
		}
	}
	s := "95% CI method: " + strings.Join(m, "; ") + "."
	if t.HasCeiling {
		s += " Ratios to the ceiling: median / host median, CI by bootstrap of the ratio of medians."
	}
	return s
}

func mdRow(w io.Writer, cells []string) {
	for i, c := range cells {
		cells[i] = mdEsc(c)
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

func dashes(n int) []string {
	d := make([]string, n)
	for i := range d {
		d[i] = "---"
	}
	return d
}

// mdEsc keeps table cells intact (pipes, newlines).
func mdEsc(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func mdCode(s string, code bool) string {
	if code {
		return "`" + mdEsc(strings.ReplaceAll(s, "`", "'")) + "`"
	}
	return mdEsc(s)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// MarkdownTable writes a table with every cell escaped, for sections other
// packages write in the report's style (history).
func MarkdownTable(w io.Writer, head []string, rows [][]string) {
	mdRow(w, slices.Clone(head))
	mdRow(w, dashes(len(head)))
	for _, r := range rows {
		mdRow(w, slices.Clone(r))
	}
}

// FormatValue prints a value as the report's tables do (3 significant digits).
func FormatValue(v float64) string { return fmtValue(v) }

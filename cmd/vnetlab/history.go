package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/present/history"
	"github.com/vnetlab/vnetlab/internal/results"
)

func init() { extraCommands = append(extraCommands, newHistoryCmd) }

func newHistoryCmd() *cobra.Command {
	var (
		cells, across []string
		detect        bool
		dir           string
		o             history.Options
	)
	cmd := &cobra.Command{
		Use:   "history DIR|FILES... [--cells PATTERNS] [--detect] [-o DIR]",
		Short: "Line up the same cells across many results files in time order; find change points; fail on a regression in the newest run",
		Long: `Read every results file given (a directory means its *.json files), order them by start
time, and follow each cell (matched as compare matches them) run after run: its median
and 95% CI per run, printed, and with -o DIR charted (one SVG per cell) in DIR/history.md.

Runs that differ in kernel, CPU count or vnetlab version are separated by a marked
boundary (in the table and as a dashed line in the chart), never silently mixed.

--detect finds change points with E-Divisive means (Matteson & James 2014, the method of
MongoDB's and OpenShift's performance CI) over the runs' medians, each with its run and
date, its size (median after / before, bootstrap 95% CI) and its permutation-test p-value.
Detection runs between boundaries only, unless --across names the kinds it may cross
(e.g. --across version for a nightly job that builds every commit); the output says so.
It exits 1 when a change in the newest --newest runs (default 1) is significant and worse
(lower Gbit/s, trans/s, conn/s; higher latency): a gate for nightly CI. One run alone can
be a significant change only in a history of 20 runs or more (docs/exports.md).`,
		Example: `  vnetlab history nightly/ --detect
  vnetlab history nightly/*.json --cells 'bridge/*/tcp_stream' --detect -o history/
  vnetlab history nightly/ --detect --across version --newest 2`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("history needs results files or directories: vnetlab history nightly/ --detect")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Across, err = history.ParseKinds(across); err != nil {
				return fmt.Errorf("--across: %w", err)
			}
			if a := o.EDivisive.Alpha; a <= 0 || a >= 1 {
				return fmt.Errorf("--alpha %g: a significance level lies between 0 and 1, e.g. --alpha 0.05", a)
			}
			o.Cells = results.CellPatterns(cells)
			if err := o.Cells.Check(); err != nil {
				return fmt.Errorf("--cells: %w", err)
			}
			runs, warnings, err := history.Load(args)
			for _, w := range warnings {
				stderrf("warning: %s", w)
			}
			if err != nil {
				return err
			}
			h, err := history.Build(runs, o)
			if err != nil {
				return err
			}
			if detect {
				h.Detect()
			}
			h.Text(os.Stdout)
			if dir != "" {
				files, err := h.Write(dir)
				if err != nil {
					return err
				}
				stderrf("history written: %s (and %d chart files, .svg and .png, in %s)", files[0], len(files)-1, dir)
			}
			if reg := h.Regressions(); len(reg) > 0 {
				var names []string
				for _, r := range reg {
					names = append(names, fmt.Sprintf("%s (×%.3f, p=%.3f)", r.Series.ID, r.Change.Ratio, r.Change.P))
				}
				return fmt.Errorf("%d of %d cells regressed significantly in the newest run: %s", len(reg), len(h.Series), strings.Join(names, ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cells, "cells", nil, "follow only the cells whose names match these patterns (mode/path/test as run names them, * within one part)")
	f.BoolVar(&detect, "detect", false, "find change points (E-Divisive means) and exit 1 on a significant regression in the newest run")
	f.StringSliceVar(&across, "across", nil, "boundary kinds detection may run across: kernel, cpus, version (never silently: the output names them)")
	f.IntVar(&o.Newest, "newest", 1, "a worse change in this many newest runs fails the command")
	f.Float64Var(&o.EDivisive.Alpha, "alpha", 0.05, "significance level of each change point's permutation test")
	f.StringVarP(&dir, "output", "o", "", "write history.md and one chart per cell (.svg and .png) into this directory")
	return cmd
}

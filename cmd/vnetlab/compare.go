package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/present/export"
	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
)

func init() { extraCommands = append(extraCommands, newCompareCmd) }

func newCompareCmd() *cobra.Command {
	var failOn string
	var exports export.Flag
	cmd := &cobra.Command{
		Use:   "compare old.json new.json [--fail-on-regression 5%] | compare lab-and-cluster.json",
		Short: "Compare two results files cell by cell: delta, its 95% CI and significance (like benchstat)",
		Long: `Match cells by mode|path|provider|test and print, per cell, the old and new medians,
the delta in percent with its 95% CI (bootstrap of the ratio of medians, from the raw
samples) and a Mann-Whitney U p-value. "~" marks a difference that is not significant
(p >= 0.05). Cells found in only one file are listed.

--fail-on-regression P exits non-zero when a cell got significantly worse by more than
P percent (Gbit/s, trans/s and conn/s: lower is worse; latency: higher is worse), or
failed in new but not in old: a gate for CI. A cell the new run predicted would fail
(its note, e.g. iptables on a bridge with bridge_nf_call_iptables=off) is shown
"failed as expected" and is no regression.

One file of a kube run that measured a lab beside its cluster (kube.lab: true, e.g.
scenarios/fidelity-flannel.yaml) is compared with itself: its lab cells against its
cluster cells, matched by path as a lab file against a cluster file is.`,
		Example: `  vnetlab compare before.json after.json
  vnetlab compare main.json branch.json --fail-on-regression 5%
  vnetlab compare fidelity-flannel.json      # its lab cells against its cluster cells`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 && len(args) != 2 {
				return fmt.Errorf("compare needs two results files: vnetlab compare old.json new.json (or one file of a lab beside a cluster)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			threshold := -1.0
			if cmd.Flags().Changed("fail-on-regression") {
				v, err := report.ParsePercent(failOn)
				if err != nil {
					return fmt.Errorf("--fail-on-regression: %w", err)
				}
				threshold = v
			}
			old, new, err := readCompared(args)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				args = []string{args[0] + " (lab)", args[0] + " (cluster)"}
			}
			c := analysis.Diff(old, new)
			if len(c.Deltas) == 0 {
				report.PrintComparison(os.Stdout, c, args[0], args[1])
				return fmt.Errorf("no cell is in both files: nothing to compare (cells match by mode|path|provider|test)")
			}
			report.PrintComparison(os.Stdout, c, args[0], args[1])
			if err := exports.Compare(c, threshold); err != nil {
				return err
			}
			if threshold < 0 {
				return nil
			}
			if reg := c.Regressions(threshold); len(reg) > 0 {
				var names []string
				for _, d := range reg {
					if d.Lost {
						names = append(names, d.Name()+" (failed)")
					} else {
						names = append(names, fmt.Sprintf("%s (%+.1f%%, p=%.3f)", d.Name(), d.Pct(), d.P))
					}
				}
				noun := "cells"
				if len(reg) == 1 {
					noun = "cell"
				}
				return fmt.Errorf("%d %s regressed by more than %g%%: %s", len(reg), noun, threshold, strings.Join(names, ", "))
			}
			fmt.Fprintf(os.Stderr, "no cell got significantly worse by more than %g%%\n", threshold)
			return nil
		},
	}
	cmd.Flags().StringVar(&failOn, "fail-on-regression", "", "exit non-zero when a cell is significantly worse by more than this (e.g. 5%)")
	export.AddFlag(cmd.Flags(), &exports)
	return cmd
}

// readCompared reads the two sides: two files, or one file's lab and
// cluster cells (kube run with kube.lab).
func readCompared(args []string) (old, new *results.File, err error) {
	if old, err = results.Read(args[0]); err != nil {
		return nil, nil, err
	}
	if len(args) == 1 {
		lab, cluster, ok := analysis.SplitLabCluster(old)
		if !ok {
			return nil, nil, fmt.Errorf("%s holds one side only: compare needs two results files (vnetlab compare old.json new.json), or one of a kube run with a lab beside its cluster (kube.lab: true)", args[0])
		}
		return lab, cluster, nil
	}
	new, err = results.Read(args[1])
	return old, new, err
}

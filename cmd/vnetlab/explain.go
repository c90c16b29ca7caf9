package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/present/explain"
	"github.com/vnetlab/vnetlab/internal/results"
)

func init() { extraCommands = append(extraCommands, newExplainCmd) }

func newExplainCmd() *cobra.Command {
	var (
		cells, test, flame, format, knobAxis string
		byFamily                             bool
	)
	cmd := &cobra.Command{
		Use:   "explain results.json [--cells A,B] [--test T] [--family] [--flamegraph out.svg]",
		Short: "Say where two profiled cells spend their CPU differently: by stage, event and function, with the numbers",
		Example: `  vnetlab run --modes host,veth-routed,macvlan --tests tcp_rr --repeat 3 --profile -o r.json
  vnetlab explain r.json
  vnetlab explain r.json --cells macvlan,veth-routed --flamegraph veth-vs-macvlan.svg
  vnetlab explain r.json -o json
  vnetlab run --modes veth-routed,macvlan --sweep mtu=1500,9000 --profile -o mtu.json
  vnetlab explain mtu.json --knob mtu     # why one mode gains more from MTU 9000 than another
  vnetlab explain load.json --knob rate   # why one path's latency knee comes at a lower offered rate
  vnetlab run --modes veth-routed,bridge --ip-family dual --tests tcp_stream --profile -o v6.json
  vnetlab explain v6.json --family        # where IPv6's extra (or saved) CPU goes, per mode
  vnetlab explain v6.json --cells veth-routed/ipv4,veth-routed/ipv6   # the same, one mode`,
		Long: `Read a results file written by "run --profile" and put two cells side by side: CPU time
per unit of work (µs per transaction, connection or MB, all CPUs) by stage of the data path
(syscall+copy, TCP/UDP, IP, routing/forwarding, netfilter, bridge, veth/backlog, ...), the
data-path events per unit that differ (backlog enqueues, transmits, FIB lookups, drops),
the kernel functions seen on one side only, and one sentence that cites those numbers.
A stage difference is marked * and may enter the sentence only when it is at least two
standard deviations of sampling noise from zero.

Default: every profiled cell against the run's baseline cell of the same path, provider
and test; in a run of one mode, every service cell against its pod cell (the table's
"vs pod"). --cells A,B compares B against A (names: a mode, MODE/PATH/PROVIDER as the table
shows it, or mode|path|provider|test).

--flamegraph out.svg writes B's differential flame graph against A as SVG: B's shape (the
data path's stacks), red where B spends more µs per unit than A, blue where less, hover
titles with both values (needs the profile files run wrote beside the results; each
cell's plain flame graph is already there, and in the report).

--knob AXIS[=VALUE] explains a swept knob instead: each mode's cell at each value of the
axis (or VALUE) against the same mode's cell at the axis's first value, then one sentence
per other mode saying why it gains more or less than the first (--cells A,B: those modes).

--family explains what IPv6 costs: each IPv6 cell of a dual-stack run (run --ip-family dual)
against the same mode's IPv4 cell, measured on the same pods (--cells A,B: those modes).
A cell's name carries its family: veth-routed/ipv6, veth-routed/pod/ipv6/tcp_rr; a mode's
bare name is its IPv4 cell.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("explain needs one results file: vnetlab explain results.json")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("-o %s: want text or json", format)
			}
			f, err := results.Read(args[0])
			if err != nil {
				return err
			}
			var names []string
			if cells != "" {
				names = strings.Split(cells, ",")
			}
			if knobAxis != "" {
				return explainKnob(f, knobAxis, test, names, format)
			}
			var pairs []explain.Pair
			if byFamily {
				pairs, err = explain.FamilyPairs(f, test, names)
			} else {
				pairs, err = explain.Select(f, names, test)
			}
			if err != nil {
				return err
			}
			if flame != "" && len(pairs) != 1 {
				return fmt.Errorf("--flamegraph draws one cell: name it with --cells A,B (and --test when the run has several)")
			}
			var all []*explain.Explanation
			for i, p := range pairs {
				e, err := explain.Compare(p.A, p.B)
				if err != nil {
					return err
				}
				all = append(all, e)
				if format == "text" {
					if i > 0 {
						fmt.Println()
					}
					if err := explain.Write(os.Stdout, e); err != nil {
						return err
					}
				}
			}
			if format == "json" {
				b, err := json.MarshalIndent(all, "", "  ")
				if err != nil {
					return err
				}
				fmt.Println(string(b))
			}
			if flame == "" {
				return nil
			}
			return writeExplainFlame(flame, args[0], pairs[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&cells, "cells", "", "two cells A,B: explain B against A (default: each cell against the baseline)")
	f.StringVar(&test, "test", "", "only this test (tcp_rr, tcp_stream, ...)")
	f.StringVar(&flame, "flamegraph", "", "write B's differential flame graph against A here (SVG)")
	f.StringVarP(&format, "output", "o", "text", "text or json")
	f.StringVar(&knobAxis, "knob", "", "explain a swept knob: AXIS or AXIS=VALUE (e.g. mtu, mtu=9000, gso+gro): each mode's gain from it, and why one gains more")
	f.BoolVar(&byFamily, "family", false, "explain what IPv6 costs: each IPv6 cell against the same mode's IPv4 cell (a run with --ip-family dual)")
	cmd.MarkFlagsMutuallyExclusive("knob", "family")
	return cmd
}

// explainKnob prints each mode's effect of a swept knob and the sentences
// comparing the modes.
func explainKnob(f *results.File, arg, test string, modes []string, format string) error {
	axis, value, _ := strings.Cut(arg, "=")
	if axis == "rate" { // latency against load: why one path's knee comes first
		sentences, err := explain.KneeSentences(f, test, modes)
		for _, s := range sentences {
			fmt.Println(s)
		}
		return err
	}
	pairs, err := explain.KnobPairs(f, axis, value, test, modes)
	if err != nil {
		return err
	}
	all, sentences, err := explain.KnobEffects(f, axis, pairs)
	if err != nil {
		return err
	}
	if format == "json" {
		b, err := json.MarshalIndent(map[string]any{"effects": all, "sentences": sentences}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Println(string(b))
		return nil
	}
	for _, e := range all {
		if err := explain.Write(os.Stdout, e); err != nil {
			return err
		}
		fmt.Println()
	}
	for _, s := range sentences {
		fmt.Println(s)
	}
	return nil
}

// writeExplainFlame draws pair.B's data-path stacks against pair.A's.
func writeExplainFlame(out, resultsPath string, pair explain.Pair) error {
	if err := explain.WriteFlameGraph(out, filepath.Dir(resultsPath), pair); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "flame graph written to %s\n", out)
	return nil
}

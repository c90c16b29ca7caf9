package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
)

func newLsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ls [LAB]",
		Short: "List labs with their nodes, pods, namespaces, addresses and test paths",
		Example: `  vnetlab ls
  vnetlab ls lab1
  vnetlab ls lab1 -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var labs []*lab.State
			if len(args) == 1 {
				st, err := lab.Load(args[0])
				if err != nil {
					return err
				}
				labs = []*lab.State{st}
			} else {
				var err error
				if labs, err = lab.List(); err != nil {
					return err
				}
			}
			switch output {
			case "json":
				if labs == nil {
					labs = []*lab.State{}
				}
				return printJSON(labs)
			case "table", "":
				if len(labs) == 0 {
					fmt.Println("no labs (start one with `vnetlab up --mode veth-routed`)")
					return nil
				}
				printLabs(os.Stdout, labs, true)
				return nil
			}
			return fmt.Errorf("-o %q: want table or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// checkTableOrJSON refuses an -o that is neither table nor json, before
// anything is built or read.
func checkTableOrJSON(output string) error {
	if output != "table" && output != "json" {
		return fmt.Errorf("-o %q: want table or json", output)
	}
	return nil
}

// showLabCmd completes cmd (its Use, Short, Example) as a verb that shows
// what read takes from the lab its one argument names: a table (table) or,
// with -o json, the value itself for scripts. A bad -o is refused before
// the lab is read.
func showLabCmd[T any](cmd *cobra.Command, read func(st *lab.State) (T, error), table func(w io.Writer, st *lab.State, v T)) *cobra.Command {
	var output string
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkTableOrJSON(output); err != nil {
			return err
		}
		st, err := lab.Load(args[0])
		if err != nil {
			return err
		}
		v, err := read(st)
		if err != nil {
			return err
		}
		if output == "json" {
			return printJSON(v)
		}
		table(os.Stdout, st, v)
		return nil
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printLabs(w io.Writer, labs []*lab.State, detail bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LAB\tMODE\tSTATUS\tWHO\tNAMESPACE\tADDRESS\tNOTE")
	for _, st := range labs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t%s\n", st.Name, st.Mode, st.Status, facts(st))
		for _, n := range st.Nodes {
			fmt.Fprintf(tw, "\t\t\t%s\t%s\t%s\tuplink %s, default via ext\n", n.Name, n.NS, addrs(n.IP, n.IP6), n.Uplink)
		}
		if st.Ext != "" {
			fmt.Fprintf(tw, "\t\t\text\t%s\t\t\"outside\" namespace\n", st.Ext)
		}
		for i, p := range st.Pods {
			if !detail && i >= 5 {
				fmt.Fprintf(tw, "\t\t\t... %d more pods\t\t\t\n", len(st.Pods)-i)
				break
			}
			fmt.Fprintf(tw, "\t\t\t%s\t%s\t%s\ton %s, %s, gw %s\n", p.Name, p.NS, addrs(p.IP, p.IP6), p.Node, p.Ifname, addrs(st.Gateway, st.Gateway6))
		}
		var paths []string
		for k := range st.Paths {
			paths = append(paths, k)
		}
		sort.Strings(paths)
		for _, k := range paths {
			e := st.Paths[k]
			fmt.Fprintf(tw, "\t\t\tpath %s\t\t%s\t%s\n", k, addrs(e.Target, e.Target6), e.Note)
		}
		if c, err := labservice.Load(st.Name); err == nil && c.Provider != "" {
			fmt.Fprintf(tw, "\t\t\tservices\t\t\t%s, %s (vnetlab svc ls %s)\n", c.Provider, c.CountText(), st.Name)
		}
	}
	tw.Flush()
}

func facts(st *lab.State) string {
	var f []string
	for k, v := range st.Facts {
		f = append(f, k+"="+v)
	}
	sort.Strings(f)
	return strings.Join(f, " ")
}

// addrs is a thing's IPv4 and IPv6 addresses, those it has, comma-separated.
func addrs(v4, v6 string) string {
	switch {
	case v4 == "":
		return v6
	case v6 == "":
		return v4
	}
	return v4 + "," + v6
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

func newCleanCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove everything any vnetlab lab created, also after a crash or kill -9",
		Example: `  sudo vnetlab clean
  sudo vnetlab clean -o json   # what was removed, for scripts`,
		Long: `Remove every lab that no running vnetlab process is using: the processes vnetlab
started (by PID), eBPF pins under /sys/fs/bpf/vnetlab, namespaces, and state under
/run/vnetlab. Objects are found through each lab's journal (written before each object is
created) and the ownership mark on each namespace (its loopback alias "vnetlab lab=NAME");
nothing without that mark is touched, except stale "vnl-" entries of /run/netns that are
no namespace any more (they cannot be entered: "Invalid argument"), which are removed,
also when their namespace is still mounted beneath a later mount of /run/netns.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			rep, err := lab.Clean(nil)
			if output == "json" && rep != nil {
				if jerr := printJSON(rep); jerr != nil {
					return jerr
				}
				return err
			}
			if rep != nil {
				fmt.Printf("removed %d labs, %d orphan namespaces, %d stale namespace entries, %d pin directories", len(rep.Labs), len(rep.Orphans), len(rep.Stale), len(rep.PinsPruned))
				if len(rep.Busy) > 0 {
					fmt.Printf("; skipped %d labs in use: %v", len(rep.Busy), rep.Busy)
				}
				fmt.Println()
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

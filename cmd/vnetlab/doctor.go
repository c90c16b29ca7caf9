package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/platform/doctor"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

func newDoctorCmd() *cobra.Command {
	var output string
	var steady int
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say which modes this kernel supports (and why not), which programs are installed, and whether `run` can work",
		Example: `  sudo vnetlab doctor
  sudo vnetlab doctor --steadiness 0   # skip the ~5 s CPU steadiness loops
  sudo vnetlab doctor -o json | jq .modes`,
		Long: `Probe the kernel in throwaway namespaces (nothing in the root namespace changes), list
every mode as available or not with the reason, every program vnetlab uses with its
version, and bpffs; then how steady the CPU run pins its tests to is, apart from any
path: an arithmetic loop and a memory-bound pointer chase, alternating in windows, and
the CV of each (a cell's CV near the chase's is the machine's, not its path's; ~5 s,
--steadiness 0 skips it). Exits non-zero when the default experiment (vnetlab run)
cannot run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := doctor.Run(steady)
			if output == "json" {
				if err := printJSON(r); err != nil {
					return err
				}
			} else {
				printDoctor(r)
			}
			if !r.DefaultRunnable {
				return fmt.Errorf("the default experiment cannot run: %s", r.Why)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().IntVar(&steady, "steadiness", 10, "windows of each steadiness loop ("+doctor.SteadinessWindow.String()+" each; 0: skip)")
	return cmd
}

func printDoctor(r *doctor.Report) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "kernel\t%s\n", r.Kernel)
	if r.Emulation != "" {
		fmt.Fprintf(tw, "emulation\t%s\n", r.Emulation)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "MODE\tAVAILABLE\tIP FAMILIES\tDETAIL")
	for _, m := range r.Modes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, yesNo(m.Available), familyList(m.Families), m.Detail)
	}
	fmt.Fprintln(tw, "\nPROGRAM\tVERSION\tNEEDED FOR")
	for _, p := range r.Programs {
		v := p.Version
		if p.Path == "" {
			v = "MISSING (apt-get install " + p.Package + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, v, p.Needed)
	}
	fmt.Fprintf(tw, "\nbpffs\t%s\n", r.BPFFS.Detail)
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note\t%s\n", n)
	}
	ok := "yes"
	if !r.DefaultRunnable {
		ok = "no: " + r.Why
	}
	fmt.Fprintf(tw, "default experiment runnable\t%s\n", ok)
	tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// familyList is "ipv4,ipv6,dual".
func familyList(fs []family.Family) string {
	var n []string
	for _, f := range fs {
		n = append(n, string(f))
	}
	return strings.Join(n, ",")
}

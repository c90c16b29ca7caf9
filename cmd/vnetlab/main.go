// Command vnetlab builds Linux virtual network data paths in namespaces,
// measures them side by side and explains the differences.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/vnetlab/vnetlab/internal/runner"
)

// version and commit are set at build time (-ldflags "-X main.version=...").
var (
	version = "dev"
	commit  = ""
)

// provenance is what made this run, for its results' metadata.
func provenance(scenario string) runner.Provenance {
	return runner.Provenance{Version: version, Commit: commit, Args: os.Args, Scenario: scenario}
}

// exitError carries a specific exit code (exec passes the command's through).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return
	}
	var ee exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	fmt.Fprintf(os.Stderr, "vnetlab: %v\n", err)
	os.Exit(1)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "vnetlab",
		Short: "Build every Linux virtual network data path in namespaces and measure them side by side",
		Long: `vnetlab builds container/VM network data paths (veth, bridge, macvlan, Docker NAT, ...)
inside network namespaces it creates, measures them with real tools (iperf3, ...),
and removes everything afterwards. The root namespace is never changed.

Typical session:
  vnetlab doctor                          # what this kernel and machine can do
  vnetlab run                             # seed 002's podIP row, one table
  vnetlab up --name lab1 --mode bridge    # a lab to poke at
  vnetlab exec lab1 pod-b -- ping -c1 192.168.10.10
  vnetlab down lab1
  vnetlab clean                           # remove anything left by a crash`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.AddCommand(newUpCmd(), newDownCmd(), newLsCmd(), newExecCmd(), newCleanCmd(), newDoctorCmd(), newRunCmd())
	for _, mk := range extraCommands {
		root.AddCommand(mk())
	}
	return root
}

// extraCommands lets each verb's file register itself (svc, ep, report, ...)
// with an init function, so verbs can be added without editing this file.
var extraCommands []func() *cobra.Command

func requireRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("vnetlab creates network namespaces and needs root: run it with sudo")
	}
	return nil
}

// isTerminal reports whether f is a terminal (progress goes there only).
func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// stderrf prints progress lines to stderr so stdout stays machine-readable.
func stderrf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

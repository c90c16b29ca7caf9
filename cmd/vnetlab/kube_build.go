package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
)

func newKubeBuildCmd() *cobra.Command {
	var only []string
	var all bool
	var help strings.Builder
	for _, b := range binaries.Builds {
		fmt.Fprintf(&help, "\n  %-18s %s", b.Name, b.For)
	}
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Build the pinned Kubernetes, CoreDNS, peers and e2e binaries into the cache ahead of their first use",
		Long: `Build, from the Go module proxy, every pinned module that a local cluster, its peers or
its conformance run would otherwise build on first use, and cache it under
~/.cache/vnetlab/kube (or $VNETLAB_KUBE_CACHE). What is cached already is not built again;
a build marked "only when named" is built only with --only, or with --all.
A machine that will go offline, or a test suite that builds while it waits, fills the
cache this way. Another process building the same module is waited for, not repeated.

The builds, in order:` + help.String(),
		Example: `  vnetlab kube build
  vnetlab kube build --only kubernetes,coredns
  vnetlab kube build --only cilium
  vnetlab kube build --all
  nice -n 19 vnetlab kube build >build.log 2>&1 &`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, n := range only {
				if !slices.Contains(binaries.BuildNames(), n) {
					return fmt.Errorf("--only %q is no build: choose among %s", n, strings.Join(binaries.BuildNames(), ", "))
				}
			}
			for _, b := range binaries.Builds {
				// Named ones with --only; every one with --all; otherwise all
				// but those built on request.
				if len(only) > 0 && !slices.Contains(only, b.Name) || len(only) == 0 && !all && b.OnRequest {
					continue
				}
				start := time.Now()
				path, err := b.Ensure(cmd.Context(), stderrf)
				if err != nil {
					return fmt.Errorf("%s: %w", b.Name, err)
				}
				fmt.Printf("%-18s %s (%s)\n", b.Name, path, time.Since(start).Round(time.Second))
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&only, "only", nil, "build only these, comma-separated: "+strings.Join(binaries.BuildNames(), ", "))
	cmd.Flags().BoolVar(&all, "all", false, "build every one, those only built when named too")
	cmd.MarkFlagsMutuallyExclusive("only", "all")
	return cmd
}

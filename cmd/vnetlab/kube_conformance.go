package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/kube/conformance"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

func newKubeConformanceCmd() *cobra.Command {
	var spec conformance.Spec
	var suites []string
	for _, s := range conformance.Suites {
		suites = append(suites, fmt.Sprintf("  %-18s %s", s.Name, s.About))
	}
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Run upstream Kubernetes e2e specs (the Services suite by default) on a fresh local cluster",
		Long: `Builds upstream e2e.test and ginkgo from the pinned Kubernetes release (cached
under ~/.cache/vnetlab/kube/e2e; the first build takes about 10 minutes), builds the
test images the specs need under their upstream names, brings up a local cluster,
loads the images, runs the specs in parallel from the control plane's namespace,
prints upstream's summary and the failed specs, and removes the cluster.
It exits 1 when a spec fails. Suites (--suite):
` + strings.Join(suites, "\n"),
		Example: `  sudo vnetlab kube conformance                          # vnetlab-ebpf, Services
  sudo vnetlab kube conformance --proxy iptables         # the stock baseline
  sudo vnetlab kube conformance --suite conntrack --proxy vnetlab-sock
  sudo vnetlab kube conformance --suite dual --proxy iptables --cni-mode veth-routed   # dual-stack`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			r, err := conformance.Run(cmd.Context(), spec, stderrf)
			if r != nil {
				printConformance(r)
			}
			if err != nil {
				return err
			}
			if len(r.Failed) > 0 {
				return exitError{code: 1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&spec.Suite, "suite", conformance.DefaultSuite, "the specs to run: "+strings.Join(conformance.SuiteNames(), ", "))
	f.StringVar(&spec.Focus, "focus", "", "a ginkgo focus regular expression instead of the suite's (brackets escaped: '\\[sig-network\\] Conntrack')")
	f.StringVar(&spec.Skip, "skip", "", "a ginkgo skip regular expression instead of the suite's (default "+conformance.DefaultSkip+")")
	f.StringVar(&spec.Cluster.Name, "name", conformance.DefaultCluster, "the cluster's name (removed at the end)")
	f.IntVar(&spec.Cluster.Nodes, "nodes", conformance.DefaultNodes, "number of nodes")
	f.IntVar(&spec.Cluster.Zones, "zones", 0, fmt.Sprintf("zones the nodes are labelled with, as kube up's (default %d, at most one per node: the Traffic Distribution specs need 3)", conformance.DefaultZones))
	f.StringVar(&spec.Cluster.Proxy, "proxy", conformance.DefaultProxy, clusternet.ProxyHelp())
	f.BoolVar(&spec.Cluster.SocketLB, "socket-lb", false, "with --proxy "+clusternet.VnetlabEBPF+": translate the pods' connections at the socket too")
	f.StringVar(&spec.Cluster.CNI, "cni", "", "CNI plugin, as kube up's --cni (default: vnetlab with vnetlab's proxies, bridge with kube-proxy)")
	f.StringVar(&spec.Cluster.CNIMode, "cni-mode", "", "with --cni vnetlab: the mode wiring each pod, "+strings.Join(modes.AttachModes(), ", ")+" (default "+modes.VethEBPF+" when --cni is not given)")
	f.StringVar(&spec.Cluster.NetworkPolicy, "network-policy", "", clusternet.EnforcerHelp()+", as kube up's (default "+clusternet.PolicyVnetlab+" with --cni "+clusternet.CNIVnetlab+" in a mode it serves, else "+clusternet.PolicyNone+")")
	// A string, not the family.Family flag value: unset means the suite's family.
	f.StringVar((*string)(&spec.Cluster.Family), "ip-family", "", "the cluster's IP family, as kube up's: ipv4, ipv6 or dual (default: dual for --suite dual, else ipv4); with IPv6 the default skip no longer skips IPv6 ("+conformance.DefaultSkipIPv6+")")
	f.IntVar(&spec.Procs, "procs", conformance.DefaultProcs, "ginkgo processes running specs in parallel")
	f.IntVar(&spec.FlakeAttempts, "flake-attempts", 1, "run a failed spec up to this many times in all (a pass on a rerun is reported as flaky)")
	f.StringVar(&spec.ReportDir, "report-dir", "", "where ginkgo's JSON and JUnit reports and its output go (default ./conformance/SUITE-PROXY-CNI)")
	f.DurationVar(&spec.Timeout, "timeout", conformance.DefaultTimeout, "bound on the specs' run (ginkgo --timeout)")
	return cmd
}

func printConformance(r *conformance.Result) {
	n := r.Spec.Cluster.Network()
	fmt.Printf("%s on a %d-node cluster, proxy %s, CNI %s, NetworkPolicy %s\n", r.Spec.Suite, r.Spec.Cluster.Nodes, n.ProxyText(), n.CNIText(), n.Policy)
	for _, l := range r.Summary {
		fmt.Println(l)
	}
	for _, f := range r.Failed {
		fmt.Printf("  FAILED %s (%s, %s)\n", f.Name, f.State, f.RunTime.Round(100*time.Millisecond))
		if f.Message != "" {
			fmt.Printf("         %s: %s\n", f.Location, f.Message)
		}
	}
	for _, f := range r.Flaky {
		fmt.Printf("  FLAKY  %s (passed on a rerun)\n", f.Name)
	}
	var steps []string
	for _, s := range r.Steps {
		steps = append(steps, fmt.Sprintf("%s %s", s.What, s.Took.Round(time.Second)))
	}
	fmt.Printf("took: %s\n", strings.Join(steps, ", "))
	fmt.Printf("reports: %s, %s (ginkgo's output: %s)\n", r.Report(conformance.JSONReport), r.Report(conformance.JUnitReport), r.Report(conformance.GinkgoLog))
}

package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/scenario"
	"github.com/vnetlab/vnetlab/internal/service"
	"github.com/vnetlab/vnetlab/internal/topo"
)

func newUpCmd() *cobra.Command {
	var (
		providerFlag           string
		extraFlag              int
		name, mode, file, cidr string
		provider               string
		extraSvc               int
		svcSpecs               []service.Spec
		pods, nodes            int
		underlayRate           string
		opts                   []string
		output                 string
	)
	cmd := &cobra.Command{
		Use:   "up [--name LAB] --mode MODE [--pods N] | up -f scenario.yaml",
		Short: "Build a lab: a node namespace, its uplink, and pods attached by a mode",
		Long: `Build a lab. A node is a network namespace with an uplink (eth0) to an "external"
namespace that holds its default route; pods are namespaces attached to the node by a
mode. Defaults follow seed 002: pods pod-a 192.168.10.10 and pod-b 192.168.10.11.

Modes:
` + modeList() + `
("vnetlab doctor" says which of them this kernel supports.)

Examples:
  vnetlab up --mode veth-routed
  vnetlab up --name big --mode bridge --pods 200
  vnetlab up --name nfoff --mode bridge --option bridge_nf_call_iptables=off
  vnetlab up --name svc --mode veth-routed --provider nftables --extra-services 10000
  vnetlab up --name x --mode vxlan --nodes 2 --underlay-rate 10gbit
  vnetlab up -f scenarios/lab-bridge.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			spec := lab.Spec{Name: "lab", Mode: mode, PodCIDR: cidr, Options: map[string]string{}}
			count := lab.DefaultPods
			if file != "" {
				sc, err := scenario.Load(file)
				if err != nil {
					return err
				}
				if sc.Mode == "" && len(sc.Modes) == 1 {
					sc.Mode, sc.Options = sc.Modes[0].Mode, sc.Modes[0].Options
				}
				if sc.Mode == "" {
					return fmt.Errorf("%s: `up` builds one lab: give `mode:` (the file lists %d modes: use `vnetlab run -f`)", file, len(sc.Modes))
				}
				spec.Mode = sc.Mode
				if sc.Name != "" {
					spec.Name = sc.Name
				}
				if sc.PodCIDR != "" {
					spec.PodCIDR = sc.PodCIDR
				}
				for k, v := range sc.Options {
					spec.Options[k] = v
				}
				spec.Pods = sc.Pods
				setInt(&spec.Nodes, sc.Nodes)
				if sc.UnderlayRate != "" {
					spec.UnderlayRate = sc.UnderlayRate
				}
				if sc.PodCount != nil {
					count = *sc.PodCount
				}
				provider, svcSpecs = sc.Provider, sc.Services
				if len(sc.ExtraServices) > 1 {
					return fmt.Errorf("%s: extra_services lists %d counts; `up` builds one lab: give one number (lists are for `vnetlab run -f`)", file, len(sc.ExtraServices))
				}
				if len(sc.ExtraServices) == 1 {
					extraSvc = sc.ExtraServices[0]
				}
			}
			f := cmd.Flags()
			if f.Changed("name") {
				spec.Name = name
			}
			if f.Changed("mode") {
				spec.Mode = mode
			}
			if f.Changed("pods") {
				count, spec.Pods = pods, nil
			}
			if f.Changed("provider") {
				provider = providerFlag
			}
			if f.Changed("extra-services") {
				extraSvc = extraFlag
			}
			if err := checkServiceFlags(provider, spec.Mode, extraSvc, len(svcSpecs) > 0); err != nil {
				return err
			}
			if f.Changed("nodes") {
				spec.Nodes = nodes
			}
			if f.Changed("underlay-rate") {
				spec.UnderlayRate = underlayRate
			}
			if spec.Mode == "" {
				return fmt.Errorf("no mode given: use --mode (one of %s)", strings.Join(topo.Names(), ", "))
			}
			if spec.PodCIDR == "" {
				spec.PodCIDR = lab.DefaultPodCIDR
			}
			if err := parseOptions(opts, spec.Options); err != nil {
				return err
			}
			if spec.Pods == nil {
				p, err := lab.DefaultPodSpecs(count, spec.PodCIDR, spec.NodeCount())
				if err != nil {
					return err
				}
				spec.Pods = p
			}
			start := time.Now()
			var say lab.Progress
			if isTerminal(os.Stderr) {
				say = stderrf
			}
			l, err := lab.Up(cmd.Context(), spec, say)
			if err != nil {
				return err
			}
			defer l.Release()
			if provider != "" {
				if err := upServices(l, provider, extraSvc, svcSpecs); err != nil {
					name := l.State.Name
					l.Release()
					_ = lab.Down(name, nil) // nothing half-built
					return err
				}
			}
			if output == "json" {
				return printJSON(l.State)
			}
			fmt.Fprintf(os.Stdout, "lab %s is up: mode %s, %d pods, %.2fs\n", l.State.Name, l.State.Mode, len(l.State.Pods), time.Since(start).Seconds())
			printLabs(os.Stdout, []*lab.State{l.State}, len(l.State.Pods) <= 10)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "name", "lab", "lab name (up to 15 characters: a-z, 0-9, -)")
	f.StringVar(&mode, "mode", "", "how pods are attached: "+strings.Join(topo.Names(), ", "))
	f.IntVar(&pods, "pods", lab.DefaultPods, "number of pods (pod-a, pod-b, ...; addresses from .10 of --pod-cidr)")
	f.IntVar(&nodes, "nodes", 1, "node namespaces: 2 joins two nodes by a veth underlay and alternates pods between them (cross-host modes: "+strings.Join(topo.CrossHostModes(), ", ")+")")
	f.StringVar(&underlayRate, "underlay-rate", "", "shape the node-to-node underlay with tbf, e.g. 10gbit (seeds 003/004's 10GbE)")
	f.StringVar(&cidr, "pod-cidr", lab.DefaultPodCIDR, "pod network")
	f.StringArrayVar(&opts, "option", nil, "mode option key=value (repeatable), e.g. bridge_nf_call_iptables=off")
	f.StringVarP(&file, "file", "f", "", "scenario YAML (flags given too override it)")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	f.StringVar(&providerFlag, "provider", "", "load Services with iptables, nftables or ebpf: the scenario's services, or "+service.DefaultVIP+" on the engine ports -> the first pod")
	f.IntVar(&extraFlag, "extra-services", 0, "with --provider: this many generated services too (lookup cost at scale)")
	return cmd
}

func parseOptions(opts []string, into map[string]string) error {
	for _, o := range opts {
		k, v, ok := strings.Cut(o, "=")
		if !ok || k == "" {
			return fmt.Errorf("--option %q: want key=value", o)
		}
		into[k] = v
	}
	return nil
}

func modeList() string {
	var b strings.Builder
	for _, m := range topo.All() {
		fmt.Fprintf(&b, "  %-12s %s\n", m.Name, m.Summary)
	}
	return b.String()
}

// checkServiceFlags validates --provider/--extra-services before anything is built.
func checkServiceFlags(provider, mode string, extra int, haveSpecs bool) error {
	if provider == "" {
		if extra != 0 || haveSpecs {
			return fmt.Errorf("services need a provider: add --provider (%s)", strings.Join(service.Names(), ", "))
		}
		return nil
	}
	if extra < 0 || extra > service.MaxExtra {
		return fmt.Errorf("--extra-services %d: want 0 to %d", extra, service.MaxExtra)
	}
	if mode == "" {
		return nil // reported by the caller
	}
	return service.Check(provider, mode)
}

// upServices loads the lab's services with provider and reports the load time.
func upServices(l *lab.Lab, provider string, extra int, specs []service.Spec) error {
	c, err := service.NewConfig(l.State, provider, extra, specs)
	if err != nil {
		return err
	}
	stderrf("loading %d services with %s", c.Count(), provider)
	if err := service.Apply(l.State, nil, c); err != nil {
		return err
	}
	if err := c.Save(l.State.Name); err != nil {
		return err
	}
	stderrf("provider %s: %d services loaded in %.2fs (see `vnetlab svc ls %s`)", provider, c.Count(), c.LoadSeconds, l.State.Name)
	return nil
}

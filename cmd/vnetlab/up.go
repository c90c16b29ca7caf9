package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/modes"
	"github.com/vnetlab/vnetlab/internal/scenario"
	"github.com/vnetlab/vnetlab/internal/service"
)

// upFlags are up's flags. Those that set a field of the lab's spec are
// bound to it, with scenario.DefaultLab's values as their defaults.
type upFlags struct {
	lab          scenario.Lab
	opts         []string
	file, output string
}

func newUpCmd() *cobra.Command {
	var u upFlags
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
			want, err := u.resolve(cmd.Flags())
			if err != nil {
				return err
			}
			start := time.Now()
			var say lab.Progress
			if isTerminal(os.Stderr) {
				say = stderrf
			}
			l, err := lab.Up(cmd.Context(), want.Spec, say)
			if err != nil {
				return err
			}
			defer l.Release()
			if want.Provider != "" {
				if err := upServices(l, want.Provider, want.Extra, want.Services); err != nil {
					name := l.State.Name
					l.Release()
					_ = lab.Down(name, nil) // nothing half-built
					return err
				}
			}
			if u.output == "json" {
				return printJSON(l.State)
			}
			fmt.Fprintf(os.Stdout, "lab %s is up: mode %s, %d pods, %.2fs\n", l.State.Name, l.State.Mode, len(l.State.Pods), time.Since(start).Seconds())
			printLabs(os.Stdout, []*lab.State{l.State}, len(l.State.Pods) <= 10)
			return nil
		},
	}
	u.register(cmd.Flags())
	return cmd
}

func (u *upFlags) register(f *pflag.FlagSet) {
	def := scenario.DefaultLab()
	s := &u.lab
	f.StringVar(&s.Spec.Name, "name", def.Spec.Name, "lab name (up to 15 characters: a-z, 0-9, -)")
	f.StringVar(&s.Spec.Mode, "mode", def.Spec.Mode, "how pods are attached: "+strings.Join(modes.Names(), ", "))
	f.IntVar(&s.PodCount, "pods", def.PodCount, "number of pods (pod-a, pod-b, ...; addresses from .10 of --pod-cidr)")
	f.IntVar(&s.Spec.Nodes, "nodes", def.Spec.NodeCount(), "node namespaces: 2 joins two nodes by a veth underlay and alternates pods between them (cross-host modes: "+strings.Join(modes.CrossHostModes(), ", ")+")")
	f.StringVar(&s.Spec.UnderlayRate, "underlay-rate", def.Spec.UnderlayRate, "shape the node-to-node underlay with tbf, e.g. 10gbit (seeds 003/004's 10GbE)")
	f.StringVar(&s.Spec.PodCIDR, "pod-cidr", def.Spec.PodCIDR, "pod network")
	f.StringArrayVar(&u.opts, "option", nil, "mode option key=value (repeatable), e.g. bridge_nf_call_iptables=off")
	f.StringVarP(&u.file, "file", "f", "", "scenario YAML (flags given too override it)")
	f.StringVarP(&u.output, "output", "o", "table", "table or json")
	f.StringVar(&s.Provider, "provider", def.Provider, "load Services with "+service.NameList()+": the scenario's services, or "+service.DefaultVIP+" on the engine ports -> the first pod")
	f.IntVar(&s.Extra, "extra-services", def.Extra, "with --provider: this many generated services too (lookup cost at scale)")
}

// resolve says what `up` builds: the defaults (scenario.DefaultLab), the
// scenario file over them, then every flag given.
func (u *upFlags) resolve(f *pflag.FlagSet) (scenario.Lab, error) {
	want := scenario.DefaultLab()
	if u.file != "" {
		sc, err := scenario.Load(u.file)
		if err != nil {
			return want, err
		}
		if want, err = sc.LabSpec(want); err != nil {
			return want, err
		}
	}
	flag := u.lab
	f.Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "name":
			want.Spec.Name = flag.Spec.Name
		case "mode":
			want.Spec.Mode = flag.Spec.Mode
		case "pods":
			want.PodCount, want.Spec.Pods = flag.PodCount, nil
		case "nodes":
			want.Spec.Nodes = flag.Spec.Nodes
		case "underlay-rate":
			want.Spec.UnderlayRate = flag.Spec.UnderlayRate
		case "pod-cidr":
			want.Spec.PodCIDR = flag.Spec.PodCIDR
		case "provider":
			want.Provider = flag.Provider
		case "extra-services":
			want.Extra = flag.Extra
		}
	})
	if err := checkServiceFlags(want.Provider, want.Spec.Mode, want.Extra, len(want.Services) > 0); err != nil {
		return want, err
	}
	if want.Spec.Mode == "" {
		return want, fmt.Errorf("no mode given: use --mode (one of %s)", strings.Join(modes.Names(), ", "))
	}
	if err := parseOptions(u.opts, want.Spec.Options); err != nil {
		return want, err
	}
	if want.Spec.Pods == nil {
		p, err := lab.DefaultPodSpecs(want.PodCount, want.Spec.PodCIDR, want.Spec.NodeCount())
		if err != nil {
			return want, err
		}
		want.Spec.Pods = p
	}
	return want, nil
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
	for _, m := range modes.All() {
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
	m, err := modes.Get(mode)
	if err != nil {
		return err
	}
	return service.Check(provider, m)
}

// upServices loads the lab's services with provider and reports the load time.
func upServices(l *lab.Lab, provider string, extra int, specs []service.Spec) error {
	c, err := service.NewConfig(l.State, provider, extra, specs)
	if err != nil {
		return err
	}
	stderrf("loading %d services with %s", c.Count(), provider)
	if err := service.Commit(l.State, nil, c); err != nil {
		return err
	}
	stderrf("provider %s: %d services loaded in %.2fs (see `vnetlab svc ls %s`)", provider, c.Count(), c.LoadSeconds, l.State.Name)
	return nil
}

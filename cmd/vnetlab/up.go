package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/scenario"
)

// upFlags are up's flags. Those that set a field of the lab's spec are
// bound to it, with the spec's values as their defaults (overlay.go).
type upFlags struct {
	lab          scenario.Lab
	opts         []string
	file, output string
	sc           *scenario.Scenario // the file, once read
}

func newUpCmd() *cobra.Command {
	u := &upFlags{lab: scenario.DefaultLab(), output: "table"}
	cmd := &cobra.Command{
		Use:   "up [--name LAB] --mode MODE [--pods N] | up -f scenario.yaml",
		Short: "Build a lab: a node namespace, its uplink, and pods attached by a mode",
		Long: `Build a lab. A node is a network namespace with an uplink (eth0) to an "external"
namespace that holds its default route; pods are namespaces attached to the node by a
mode. Defaults follow seed 002: pods pod-a 192.168.10.10 and pod-b 192.168.10.11.

Modes:
` + modeList() + `
("vnetlab doctor" says which of them this kernel supports.)`,
		Example: `  vnetlab up --mode veth-routed
  vnetlab up --name big --mode bridge --pods 200
  vnetlab up --name nfoff --mode bridge --option bridge_nf_call_iptables=off
  vnetlab up --name svc --mode veth-routed --provider nftables --extra-services 10000
  vnetlab up --name x --mode vxlan --nodes 2 --underlay-rate 10gbit
  vnetlab up --name v6 --mode veth-routed --ip-family ipv6
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
			l, c, err := labservice.UpLab(cmd.Context(), want.Spec, want.Provider, want.Extra, want.Services, say)
			if err != nil {
				return inputErr(err, cmd.Flags(), u.sc)
			}
			defer l.Release()
			if c != nil {
				stderrf("provider %s: %d services loaded in %.2fs (see `vnetlab svc ls %s`)", c.Provider, c.Count(), c.LoadSeconds, l.State.Name)
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
	s := &u.lab
	f.StringVar(&s.Spec.Name, "name", s.Spec.Name, "lab name (up to 15 characters: a-z, 0-9, -)")
	f.StringVar(&s.Spec.Mode, "mode", s.Spec.Mode, "how pods are attached: "+strings.Join(modes.Names(), ", "))
	f.IntVar(&s.PodCount, "pods", s.PodCount, "number of pods (pod-a, pod-b, ...; addresses from .10 of --pod-cidr)")
	f.IntVar(&s.Spec.Nodes, "nodes", s.Spec.NodeCount(), "node namespaces: 2 joins two nodes by a veth underlay and alternates pods between them (cross-host modes: "+strings.Join(modes.CrossHostModes(), ", ")+")")
	f.StringVar(&s.Spec.UnderlayRate, "underlay-rate", s.Spec.UnderlayRate, "shape the node-to-node underlay with tbf, e.g. 10gbit (seeds 003/004's 10GbE)")
	f.StringVar(&s.Spec.PodCIDR, "pod-cidr", s.Spec.PodCIDR, "pod network")
	f.Var(&s.Spec.Family, "ip-family", ipFamilyHelp)
	f.StringVar(&s.Spec.PodCIDR6, "pod-cidr6", s.Spec.PodCIDR6, "pods' IPv6 network with --ip-family ipv6 or dual (default "+lab.DefaultPodCIDR6+")")
	f.StringArrayVar(&u.opts, "option", nil, "mode option key=value (repeatable), e.g. bridge_nf_call_iptables=off")
	f.StringVarP(&u.file, "file", "f", "", "scenario YAML (flags given too override it)")
	f.StringVarP(&u.output, "output", "o", u.output, "table or json")
	f.StringVar(&s.Provider, "provider", s.Provider, "load Services with "+labservice.NameList()+": the scenario's services, or "+labservice.DefaultVIP+" (IPv6: "+labservice.DefaultVIP6+") on the engine ports -> the first pod")
	f.IntVar(&s.Extra, "extra-services", s.Extra, "with --provider: this many generated services too (lookup cost at scale)")
}

// resolve says what `up` builds: the defaults (scenario.DefaultLab), the
// scenario file over them, then every flag given.
func (u *upFlags) resolve(given *pflag.FlagSet) (scenario.Lab, error) {
	want := scenario.DefaultLab()
	if err := checkTableOrJSON(u.output); err != nil {
		return want, err
	}
	if u.file != "" {
		sc, err := scenario.Load(u.file)
		u.sc = sc
		if err != nil {
			return want, err
		}
		if want, err = sc.LabSpec(want); err != nil {
			return want, err
		}
	}
	w := &upFlags{lab: want, output: u.output}
	fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
	w.register(fs)
	if err := overlay(given, fs); err != nil {
		return want, err
	}
	want = w.lab
	if fs.Changed("pods") {
		want.Spec.Pods = nil // a count replaces the file's list
	}
	if err := parseOptions(u.opts, want.Spec.Options); err != nil {
		return want, err
	}
	return want, inputErr(want.Validate(), given, u.sc)
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

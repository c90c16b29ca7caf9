package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/service"
)

func init() { extraCommands = append(extraCommands, newSvcCmd) }

func newSvcCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "svc",
		Short: "Add, list and delete a running lab's Services (clusterIP:port -> pod backends)",
		Long: `A Service is clusterIP:port/proto in front of pod backends, realised in the lab by a
provider, as kube-proxy or an eBPF CNI does on a node:

` + providerList() + `
The lab's provider is chosen by the first "svc add --provider" (iptables by default) or
by "up --provider", and kept in the lab's state (services.json) with its services.`,
	}
	cmd.AddCommand(newSvcAddCmd(), newSvcLsCmd(), newSvcDelCmd())
	return cmd
}

func providerList() string {
	var b strings.Builder
	for _, n := range service.Names() {
		p, _ := service.Get(n)
		fmt.Fprintf(&b, "  %-9s %s\n", n, p.Summary())
	}
	return b.String()
}

func newSvcAddCmd() *cobra.Command {
	var (
		svc, provider string
		backends      []string
	)
	cmd := &cobra.Command{
		Use:   "add LAB --service VIP:PORT[/tcp|/udp] --backend IP:PORT [--backend ...] [--provider P]",
		Short: "Add a service to a running lab (seed 002: mustang svc add)",
		Example: `  vnetlab svc add lab --service 10.96.0.100:5201 --backend 192.168.10.10:5201
  vnetlab svc add lab --service 10.96.0.100:5201/udp --backend pod-a --provider nftables
  vnetlab svc add lab --service 10.96.0.101:80 --backend pod-a:5201 --backend pod-c:5201`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			if svc == "" {
				return fmt.Errorf("no --service given (example: --service 10.96.0.100:5201/tcp)")
			}
			key, err := service.ParseKey(svc)
			if err != nil {
				return err
			}
			var specs []service.BackendSpec
			for _, b := range backends {
				bs, err := service.ParseBackend(b)
				if err != nil {
					return err
				}
				specs = append(specs, bs)
			}
			if provider != "" {
				if _, err := service.Get(provider); err != nil {
					return err
				}
			}
			hint := ""
			err = withServices(args[0], func(st *lab.State, c *service.Config) (string, error) {
				if err := chooseProvider(st, c, provider); err != nil {
					return "", err
				}
				if err := service.CheckVIP(st, key.VIP); err != nil {
					return "", err
				}
				if len(specs) == 0 && !service.KeepsEmptyServices(c.Provider) {
					return "", fmt.Errorf("no --backend given: a service of provider %s needs at least one (example: --backend 192.168.10.10:5201 or --backend pod-a; only the ebpf provider keeps a Service without backends, refusing its clients)", c.Provider)
				}
				var be []service.Backend
				if len(specs) > 0 {
					if be, err = service.Resolve(st, specs, key.Port); err != nil {
						return "", err
					}
				}
				s := service.Service{VIP: key.VIP, Port: key.Port, Proto: key.Proto, Backends: be}
				if err := c.Add(s); err != nil {
					return "", err
				}
				if c.Provider == "ebpf" && len(c.Endpoints) == 0 && !service.ModeOwnsPrograms(st.Mode) {
					hint = fmt.Sprintf("no endpoints yet: attach the programs where traffic enters, e.g. `vnetlab ep add %s --pod %s`", st.Name, clientPod(st))
				}
				if len(s.Backends) == 0 {
					return fmt.Sprintf("service %s added without backends: its clients are refused (ICMP port unreachable) until one is added", s), nil
				}
				return fmt.Sprintf("service %s -> %s added", s, backendList(s.Backends)), nil
			})
			if err == nil && hint != "" {
				fmt.Println(hint)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&svc, "service", "", "clusterIP:port, optionally /tcp or /udp (tcp by default)")
	f.StringArrayVar(&backends, "backend", nil, "backend pod as IP:PORT or POD:PORT (port defaults to the service's); repeatable; none: only with the ebpf provider, whose programs refuse the Service's clients")
	f.StringVar(&provider, "provider", "", "iptables, nftables or ebpf (only when the lab has no services yet; default iptables)")
	return cmd
}

func newSvcDelCmd() *cobra.Command {
	var svc string
	cmd := &cobra.Command{
		Use:     "del LAB --service VIP:PORT[/tcp|/udp]",
		Short:   "Delete a service from a running lab (connections already open keep their conntrack NAT)",
		Example: `  vnetlab svc del lab --service 10.96.0.100:5201/tcp`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			if svc == "" {
				return fmt.Errorf("no --service given (example: --service 10.96.0.100:5201/tcp)")
			}
			key, err := service.ParseKey(svc)
			if err != nil {
				return err
			}
			return withServices(args[0], func(st *lab.State, c *service.Config) (string, error) {
				if err := c.Del(key); err != nil {
					return "", err
				}
				return fmt.Sprintf("service %s deleted", key), nil
			})
		},
	}
	cmd.Flags().StringVar(&svc, "service", "", "clusterIP:port, optionally /tcp or /udp (tcp by default)")
	return cmd
}

func newSvcLsCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ls LAB",
		Short: "List a lab's services, their backends and provider (-o json for scripts)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, c, err := readServices(args[0], output)
			if err != nil {
				return err
			}
			if output == "json" {
				if c.Services == nil {
					c.Services = []service.Service{}
				}
				return printJSON(c)
			}
			printServices(os.Stdout, st, c)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

// readServices loads a lab and its services for a read-only listing, after
// checking the -o value (table or json).
func readServices(name, output string) (*lab.State, *service.Config, error) {
	if output != "table" && output != "json" {
		return nil, nil, fmt.Errorf("-o %q: want table or json", output)
	}
	st, err := lab.Load(name)
	if err != nil {
		return nil, nil, err
	}
	c, err := service.Load(st.Name)
	return st, c, err
}

// withServices runs change on a lab's services under the lab's lock, applies
// the result with the provider and saves it; on any error the lab and its
// services.json stay as they were.
func withServices(name string, change func(*lab.State, *service.Config) (string, error)) error {
	l, err := lab.Open(name)
	if err != nil {
		return err
	}
	defer l.Release()
	st := l.State
	c, err := service.Load(st.Name)
	if err != nil {
		return err
	}
	old := c.Clone()
	msg, err := change(st, c)
	if err != nil {
		return err
	}
	if err := service.Commit(st, old, c); err != nil {
		return err
	}
	fmt.Printf("%s: lab %s, provider %s, %s, loaded in %.2fs\n", msg, st.Name, c.Provider, countWords(c), c.LoadSeconds)
	return nil
}

// chooseProvider sets the provider on the first service; a lab with
// services keeps its provider.
func chooseProvider(st *lab.State, c *service.Config, want string) error {
	if want == "" || want == c.Provider {
		if c.Provider == "" {
			c.Provider = service.DefaultProviderFor(st.Mode)
		}
		return service.Check(c.Provider, st.Mode)
	}
	if c.Provider != "" && c.Count() > 0 {
		return fmt.Errorf("lab %s's %d services are realised by %s: leave out --provider, or delete them first to switch to %s", st.Name, c.Count(), c.Provider, want)
	}
	if err := service.Check(want, st.Mode); err != nil {
		return err
	}
	if c.Installed {
		old, _ := service.Get(c.Provider)
		if err := old.Remove(st, c); err != nil {
			return fmt.Errorf("removing provider %s: %w", c.Provider, err)
		}
		c.Installed = false
	}
	c.Provider = want
	return nil
}

func countWords(c *service.Config) string {
	s := fmt.Sprintf("%d services", len(c.Services))
	if c.Extra > 0 {
		s += fmt.Sprintf(" + %d generated", c.Extra)
	}
	return s
}

func backendList(bs []service.Backend) string {
	var out []string
	for _, b := range bs {
		s := b.String()
		if b.Pod != "" {
			s += " (" + b.Pod + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func clientPod(st *lab.State) string {
	if len(st.Pods) > 1 {
		return st.Pods[1].Name
	}
	if len(st.Pods) == 1 {
		return st.Pods[0].Name
	}
	return "POD"
}

func printServices(w io.Writer, st *lab.State, c *service.Config) {
	if c.Provider == "" {
		fmt.Fprintf(w, "lab %s has no services (add one: vnetlab svc add %s --service %s:5201 --backend %s)\n", st.Name, st.Name, service.DefaultVIP, firstPodIP(st))
		return
	}
	state := "loaded"
	if !c.Installed {
		state = "not loaded"
	}
	fmt.Fprintf(w, "lab %s: provider %s (%s, last load %.2fs), %s\n", st.Name, c.Provider, state, c.LoadSeconds, countWords(c))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSERVICE\tPORT\tPROTO\tBACKENDS")
	for i, s := range c.Sorted() {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", i+1, s.VIP, s.Port, s.Proto, backendList(s.Backends))
	}
	if c.Extra > 0 {
		first, last := service.Generated(0), service.Generated(c.Extra-1)
		fmt.Fprintf(tw, "\t%s .. %s\t%d-%d\ttcp\t%d generated services, %d backend each in %s (never dialed)\n",
			first.VIP, last.VIP, service.GeneratedBasePort, service.GeneratedBasePort+service.GeneratedPorts-1, c.Extra, service.GeneratedBackends, service.GeneratedBackendRange)
	}
	tw.Flush()
}

func firstPodIP(st *lab.State) string {
	if len(st.Pods) > 0 {
		return st.Pods[0].IP + ":5201"
	}
	return "POD-IP:5201"
}

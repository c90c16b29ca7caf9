package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
)

func init() { extraCommands = append(extraCommands, newPolicyCmd) }

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Add, list and delete a running lab's NetworkPolicies (Kubernetes YAML)",
		Long: `NetworkPolicies with Kubernetes' semantics (docs/policies.md), enforced in the lab by a
policy provider (` + strings.Join(labpolicy.Names(), ", ") + `). A policy file is a YAML stream of
networking.k8s.io/v1 NetworkPolicy, v1 Namespace (labels) and v1 Pod documents; a Pod document
names a lab pod and gives it a namespace, labels and named container ports (by default a pod is
in namespace default with the label pod=NAME). The lab keeps them in policies.json.`,
	}
	cmd.AddCommand(newPolicyAddCmd(), newPolicyLsCmd(), newPolicyDelCmd(), newPolicyConvergeCmd())
	return cmd
}

func newPolicyAddCmd() *cobra.Command {
	var file, provider string
	cmd := &cobra.Command{
		Use:   "add LAB -f FILE [--provider P]",
		Short: "Add the policies, namespaces and pods of a YAML file to a running lab (same names are replaced)",
		Example: `  vnetlab policy add lab -f policies.yaml
  vnetlab policy add lab -f - < deny-all.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			if file == "" {
				return fmt.Errorf("no -f given: name a YAML file of NetworkPolicy, Namespace and Pod documents (- reads stdin)")
			}
			var data []byte
			var err error
			if file == "-" {
				data, err = io.ReadAll(os.Stdin)
			} else {
				data, err = os.ReadFile(file)
			}
			if err != nil {
				return err
			}
			doc, err := netpol.Parse(data)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			res, err := labpolicy.Add(args[0], doc, provider)
			if err == nil {
				fmt.Println(res)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "YAML file (- for stdin)")
	f.StringVar(&provider, "provider", "", strings.Join(labpolicy.Names(), ", ")+" (only when the lab has no policies loaded; default "+labpolicy.DefaultProvider+")")
	return cmd
}

func newPolicyDelCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "del LAB [NAMESPACE/]NAME",
		Short:   "Delete a policy from a running lab (namespace default when not given)",
		Example: `  vnetlab policy del lab shop/deny-all`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			ns, name, ok := strings.Cut(args[1], "/")
			if !ok {
				ns, name = "", args[1]
			}
			res, err := labpolicy.Del(args[0], ns, name)
			if err == nil {
				fmt.Println(res)
			}
			return err
		},
	}
	return cmd
}

func newPolicyLsCmd() *cobra.Command {
	return showLabCmd(&cobra.Command{
		Use:   "ls LAB",
		Short: "List a lab's policies, the pods each selects, and every pod's isolation (-o json for scripts)",
		Example: `  vnetlab policy ls lab
  vnetlab policy ls lab -o json`,
	}, func(st *lab.State) (labpolicy.Listing, error) {
		c, err := labpolicy.Load(st.Name)
		if err != nil {
			return labpolicy.Listing{}, err
		}
		return labpolicy.List(st, c)
	}, printPolicies)
}

func printPolicies(w io.Writer, _ *lab.State, l labpolicy.Listing) {
	if len(l.Policies) == 0 {
		fmt.Fprintf(w, "lab %s has no policies (add some: vnetlab policy add %s -f FILE.yaml)\n", l.Lab, l.Lab)
	} else {
		state := "loaded"
		if !l.Installed {
			state = "not loaded"
		}
		fmt.Fprintf(w, "lab %s: provider %s (%s), %d policies\n", l.Lab, l.Provider, state, len(l.Policies))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tPOLICY\tTYPES\tSELECTS\tINGRESS RULES\tEGRESS RULES")
		for _, p := range l.Policies {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", p.Namespace, p.Name, strings.Join(p.Types, ","), orNone(strings.Join(p.Selects, ",")), p.Ingress, p.Egress)
		}
		tw.Flush()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tNAMESPACE\tLABELS\tADDRESSES\tINGRESS\tEGRESS")
	for _, p := range l.Pods {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Namespace, orNone(p.Labels), p.Addresses, isolation(p.IsolatedIngress), isolation(p.IsolatedEgress))
	}
	tw.Flush()
}

func isolation(isolated bool) string {
	if isolated {
		return "isolated"
	}
	return "open"
}

package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/kube/netpolicy"
)

func init() { extraCommands = append(extraCommands, newKubeNetpolCmd) }

// newKubeNetpolCmd is vnetlab's NetworkPolicy controller for one node,
// started by `kube up --network-policy vnetlab` in each node's namespace
// (docs/kubernetes-policies.md).
func newKubeNetpolCmd() *cobra.Command {
	var c netpolicy.Config
	cmd := &cobra.Command{
		Use:   "kube-netpol --kubeconfig F --node NAME",
		Short: "Follow a cluster's NetworkPolicies, Pods and Namespaces into this node's policy rules (kube up --network-policy vnetlab starts it in each node's namespace)",
		Example: `  # as kube up --cni vnetlab starts it in node k-node1's namespace (nftables rules)
  sudo ip netns exec vnl-k-node1 vnetlab kube-netpol --kubeconfig /run/vnetlab/labs/k/kubeconfig-internal --node k-node1`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			if c.Kubeconfig == "" || c.Node == "" {
				return fmt.Errorf("kube-netpol needs --kubeconfig and --node (the node whose pods it isolates)")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			c.Logf = func(f string, a ...any) {
				fmt.Fprintf(os.Stderr, "%s "+f+"\n", append([]any{time.Now().Format("15:04:05.000")}, a...)...)
			}
			return netpolicy.Run(ctx, c)
		},
	}
	cmd.Flags().StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster's API server")
	cmd.Flags().StringVar(&c.Node, "node", "", "this node's Kubernetes name: the pods whose spec.nodeName it is get their rules here")
	cmd.Flags().StringVar(&c.Plane, "plane", "", "the node's eBPF plane (under /sys/fs/bpf/vnetlab): enforce with eBPF programs on the pods' interfaces (CNI mode veth-ebpf) instead of nftables")
	cmd.Flags().StringVar(&c.ContainerdState, "containerd-state", "", "with --plane: the node's containerd state directory, under which the pods' network namespaces are mounted")
	return cmd
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/kube/network"
)

// clusterFlags choose a cluster: a kubeconfig (and context) or a local
// cluster by name.
type clusterFlags struct {
	kubeconfig, context, cluster string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", f.kubeconfig, "kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", f.context, "kubeconfig context (default: its current context)")
	cmd.Flags().StringVar(&f.cluster, "cluster", f.cluster, "a local cluster made by vnetlab kube up (instead of --kubeconfig)")
}

// resolve returns the kubeconfig path and the local cluster's network (nil
// for another cluster).
func (f *clusterFlags) resolve() (string, *network.Network, error) {
	if f.cluster == "" {
		return f.kubeconfig, nil, nil
	}
	if f.kubeconfig != "" || f.context != "" {
		return "", nil, fmt.Errorf("give either --cluster or --kubeconfig/--context, not both")
	}
	st, err := cluster.Load(f.cluster)
	if err != nil {
		return "", nil, err
	}
	n := cluster.Network(st)
	return st.Facts[cluster.FactKubeconfig], &n, nil
}

func newKubeCleanCmd() *cobra.Command {
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Delete the namespaces `kube run` left in a cluster (labelled app.kubernetes.io/managed-by=vnetlab)",
		Long: `Delete every namespace carrying vnetlab's label, left by a kube run that was killed
(kill -9) before it could delete its own. Nothing without the label is touched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kubeconfig, _, err := cf.resolve()
			if err != nil {
				return err
			}
			cs, _, _, err := measure.Connect(cmd.Context(), kubeconfig, cf.context)
			if err != nil {
				return err
			}
			gone, err := measure.Clean(cmd.Context(), cs)
			fmt.Printf("deleted %d namespaces %v\n", len(gone), gone)
			return err
		},
	}
	cf.add(cmd)
	return cmd
}

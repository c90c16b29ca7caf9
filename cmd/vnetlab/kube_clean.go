package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
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

// kubeconfigPath is the kubeconfig path the flags name (a local cluster's own).
func (f *clusterFlags) kubeconfigPath() (string, error) {
	if f.cluster == "" {
		return f.kubeconfig, nil
	}
	if f.kubeconfig != "" || f.context != "" {
		return "", fmt.Errorf("give either --cluster or --kubeconfig/--context, not both")
	}
	st, err := cluster.Load(f.cluster)
	if err != nil {
		return "", err
	}
	return st.Facts[cluster.FactKubeconfig], nil
}

func newKubeCleanCmd() *cobra.Command {
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Delete the namespaces `kube run` left in a cluster (labelled app.kubernetes.io/managed-by=vnetlab)",
		Example: `  vnetlab kube clean --cluster k
  vnetlab kube clean --kubeconfig ~/.kube/config --context prod`,
		Long: `Delete every namespace carrying vnetlab's label, left by a kube run that was killed
(kill -9) before it could delete its own. Nothing without the label is touched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kubeconfig, err := cf.kubeconfigPath()
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

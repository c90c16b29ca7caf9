package main

import (
	"errors"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

func newExecCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "exec LAB POD|node|ext -- CMD [ARGS...]",
		Short: "Run a command inside a pod's (or the node's) network namespace",
		Example: `  vnetlab exec lab pod-b -- ping -c 3 192.168.10.10
  vnetlab exec k k-node1 -- nc -zv 10.96.0.1 443   # a local cluster's node (in its cgroup too)
  vnetlab exec lab node -- ip route
  vnetlab exec lab node -- iptables-save`,
		Args: cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot(); err != nil {
				return err
			}
			st, err := lab.Load(args[0])
			if err != nil {
				return err
			}
			ns, err := st.NSName(args[1])
			if err != nil {
				return err
			}
			path, err := exec.LookPath(args[2])
			if err != nil {
				return err
			}
			c := proc.Command(cmd.Context(), ns, path, args[3:]...)
			// Socket-level Services (ebpf-sock) act for processes in the
			// lab's cgroup: commands run there when it exists.
			if cg, err := cgroup.LabPath(st.Name); err == nil {
				if _, err := os.Stat(cg); err == nil {
					if err := c.InCgroup(cg); err != nil {
						return err
					}
				}
			}
			// A local cluster's node: its own processes are in its cgroup,
			// where vnetlab's proxies translate ClusterIPs.
			for _, n := range st.Nodes {
				if st.Mode == lab.KubeMode && n.NS == ns {
					if cg, err := cluster.NodeCgroup(n.Name); err == nil {
						if _, err := os.Stat(cg); err == nil {
							if err := c.InCgroup(cg); err != nil {
								return err
							}
						}
					}
				}
			}
			c.SysProcAttr.Setpgid = false // stay in the terminal's process group
			c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
			err = c.Run()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return exitError{code: ee.ExitCode()}
			}
			return err
		},
	}
}

package cluster

// What the CLI does to local clusters besides kube up: list, load, down,
// import images.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// List returns the local clusters.
func List() ([]*lab.State, error) {
	all, err := lab.List()
	var out []*lab.State
	for _, s := range all {
		if s.Mode == lab.KubeMode {
			out = append(out, s)
		}
	}
	return out, err
}

// Load returns a local cluster's state, refusing labs that are not clusters.
func Load(name string) (*lab.State, error) {
	st, err := lab.Load(name)
	if err != nil {
		return nil, fmt.Errorf("no local cluster named %q (see `vnetlab kube ls`)", name)
	}
	if st.Mode != lab.KubeMode {
		return nil, fmt.Errorf("%s is a vnetlab lab (mode %s), not a local cluster: see `vnetlab kube ls`", name, st.Mode)
	}
	if st.Status == StatusSwitchingProxy {
		return nil, errSwitching(st)
	}
	if st.Status != "ready" {
		return nil, fmt.Errorf("cluster %s is %s: wait for `kube up` to finish, or remove it with `vnetlab kube down %s`", name, st.Status, name)
	}
	return st, nil
}

// Down removes a local cluster: its processes, containers, cgroups, mounts,
// state and namespaces, and restores the sysctls kubelet changed.
func Down(name string, say func(string, ...any)) error {
	st, err := lab.Load(name)
	if err != nil {
		return fmt.Errorf("no local cluster named %q (see `vnetlab kube ls`)", name)
	}
	if st.Mode != lab.KubeMode {
		return fmt.Errorf("%s is a vnetlab lab (mode %s), not a local cluster: remove it with `vnetlab down %s`", name, st.Mode, name)
	}
	return lab.Down(name, say)
}

// LoadImages imports image archives into every node of a local cluster.
func LoadImages(ctx context.Context, name string, tars []string) error {
	st, err := Load(name)
	if err != nil {
		return err
	}
	for _, t := range tars {
		if _, err := os.Stat(t); err != nil {
			return fmt.Errorf("image archive %s: %w", t, err)
		}
	}
	for _, n := range st.Nodes {
		sock := filepath.Join(lab.Dir(name), n.Name, "containerd", "containerd.sock")
		for _, t := range tars {
			if err := ImportImage(ctx, sock, t); err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

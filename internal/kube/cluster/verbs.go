package cluster

// What the CLI does to local clusters besides kube up: list, load, down,
// import images.

import (
	"context"
	"errors"
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
	if err := usable(st); err != nil {
		return nil, err
	}
	return st, nil
}

// usable says why a lab's state is no ready local cluster (nil: it is).
func usable(st *lab.State) error {
	if st.Mode != lab.KubeMode {
		return fmt.Errorf("%s is a vnetlab lab (mode %s), not a local cluster: see `vnetlab kube ls`", st.Name, st.Mode)
	}
	if st.Status == StatusSwitchingProxy {
		return errSwitching(st)
	}
	if st.Status != "ready" {
		return fmt.Errorf("cluster %s is %s: wait for `kube up` to finish, or remove it with `vnetlab kube down %s`", st.Name, st.Status, st.Name)
	}
	return nil
}

// Hold loads local cluster name for a run that uses it without changing
// it (kube converge) and holds it until release: set-proxy, kube down and
// vnetlab clean are refused meanwhile, so its proxy is the same from the
// run's start to its end. Any number of runs may hold it at once.
func Hold(name string) (st *lab.State, release func(), err error) {
	if _, err := Load(name); err != nil {
		return nil, nil, err
	}
	l, err := lab.OpenShared(name)
	if errors.Is(err, lab.ErrInUse) {
		return nil, nil, fmt.Errorf("cluster %s is %w (a kube set-proxy or down): wait for it to end", name, lab.ErrInUse)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := usable(l.State); err != nil {
		l.Release()
		return nil, nil, err
	}
	return l.State, l.Release, nil
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

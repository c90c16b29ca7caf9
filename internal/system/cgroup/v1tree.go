package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// V1Hierarchies lists where cgroup v1 hierarchies are mounted (cpu, memory,
// name=systemd, ...): a kubelet with the cgroupfs driver on a hybrid host
// needs its cgroup root in each of them.
func V1Hierarchies() ([]string, error) {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) >= 3 && fl[2] == "cgroup" {
			out = append(out, unescape(fl[1]))
		}
	}
	return out, sc.Err()
}

// KubeSub is the directory, in every hierarchy, holding the cgroup roots of
// local Kubernetes nodes (apart from the labs' cgroups under Sub).
const KubeSub = "vnetlab-kube"

// KubeHierarchies are where a node's cgroup tree lives: every v1 hierarchy
// and, on a hybrid host, the unified one (runc mirrors its cgroups there).
func KubeHierarchies() ([]string, error) {
	hs, err := V1Hierarchies()
	if err != nil || len(hs) == 0 {
		return hs, err
	}
	if root, err := Root(); err == nil {
		hs = append(hs, root)
	}
	return hs, nil
}

// CreateKubeTree makes <hierarchy>/vnetlab-kube/<rel> in every hierarchy of
// KubeHierarchies and records each leaf (before making it). In cpuset, each new level gets its parent's
// cpus and mems (a new cpuset is empty and refuses tasks).
func CreateKubeTree(rel string, record func(path string) error) error {
	hs, err := KubeHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := record(filepath.Join(h, KubeSub, rel)); err != nil {
			return err
		}
		dir := h
		for _, part := range strings.Split(filepath.Join(KubeSub, rel), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if _, err := os.Stat(dir); err == nil {
				continue
			}
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
					if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
						return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, f), err)
					}
				}
			}
		}
	}
	return nil
}

// RemoveKubeTree kills every process in a cgroup tree under a hierarchy's
// vnetlab-kube directory (the containers of a local cluster's node: only vnetlab's
// cluster put processes there), then removes the directories, deepest first.
func RemoveKubeTree(path string) error {
	if !underKubeSub(path) {
		return fmt.Errorf("cgroup %s is not under a hierarchy's %s directory: left alone", path, KubeSub)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var err error
	for try := 0; try < 100; try++ {
		var dirs []string
		_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, werr error) error {
			if werr == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			pids, _ := Procs(d)
			for _, pid := range pids {
				if start, serr := proc.StartTime(pid); serr == nil && proc.Alive(pid, start) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		err = nil
		for _, d := range dirs {
			if rerr := unix.Rmdir(d); rerr != nil && !errors.Is(rerr, unix.ENOENT) {
				err = rerr
			}
		}
		if err == nil {
			_ = unix.Rmdir(filepath.Dir(path)) // vnetlab-kube, once empty
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", path, err)
}

func underKubeSub(path string) bool {
	hs, err := KubeHierarchies()
	if err != nil {
		return false
	}
	for _, h := range hs {
		if rel, err := filepath.Rel(filepath.Join(h, KubeSub), filepath.Clean(path)); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return true
		}
	}
	return false
}

// Package cgroup gives each lab a cgroup v2 directory of its own, the place
// where socket-level programs (cgroup connect4, sendmsg4, ...) are attached
// and where the lab's client processes run. vnetlab never attaches anything
// to the root cgroup: that would change every process on the machine.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Sub is vnetlab's directory under the cgroup v2 root: one child per lab.
const Sub = "vnetlab"

// Root returns where cgroup v2 is mounted, read from /proc/mounts
// (/sys/fs/cgroup on unified systems, /sys/fs/cgroup/unified on hybrid ones).
func Root() (string, error) {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) >= 3 && fl[2] == "cgroup2" {
			return unescape(fl[1]), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", errors.New("cgroup v2 is not mounted (no cgroup2 line in /proc/mounts): socket-level Services need it; mount it with `mount -t cgroup2 none /sys/fs/cgroup/unified`")
}

// unescape undoes /proc/mounts' octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// LabPath is the lab's cgroup directory: <root>/vnetlab/<lab>.
func LabPath(lab string) (string, error) {
	if lab == "" || filepath.Base(lab) != lab || lab == "." || lab == ".." {
		return "", fmt.Errorf("cgroup: bad lab name %q", lab)
	}
	root, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, Sub, lab), nil
}

// Create makes the lab's cgroup (and vnetlab's parent directory). created
// is false when it already existed.
func Create(lab string) (path string, created bool, err error) {
	path, err = LabPath(lab)
	if err != nil {
		return "", false, err
	}
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", false, fmt.Errorf("cgroup %s: %w", filepath.Dir(path), err)
	}
	err = os.Mkdir(path, 0o755)
	if errors.Is(err, os.ErrExist) {
		return path, false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("cgroup %s: %w", path, err)
	}
	return path, true, nil
}

// mine refuses any path that is not a lab directory under vnetlab's subtree.
func mine(path string) error {
	root, err := Root()
	if err != nil {
		return err
	}
	if filepath.Dir(filepath.Clean(path)) != filepath.Join(root, Sub) {
		return fmt.Errorf("cgroup %s is not a vnetlab lab cgroup (%s/<lab>): left alone", path, filepath.Join(root, Sub))
	}
	return nil
}

// Procs lists the processes in a cgroup (not its children).
func Procs(path string) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// Remove stops the processes left in a lab's cgroup (only vnetlab puts
// processes there; each is stopped by PID and start time) and removes it,
// then vnetlab's parent directory if no other lab uses it. A missing
// cgroup is not an error.
func Remove(path string) error {
	if err := mine(path); err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var err error
	for try := 0; try < 50; try++ {
		pids, _ := Procs(path)
		for _, pid := range pids {
			if start, serr := proc.StartTime(pid); serr == nil {
				proc.Stop(pid, start, time.Second)
			}
		}
		// rmdir fails with EBUSY until the last (zombie) process is reaped.
		if err = unix.Rmdir(path); err == nil || errors.Is(err, unix.ENOENT) {
			_ = unix.Rmdir(filepath.Dir(path)) // ENOTEMPTY while other labs have one
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", path, err)
}

// Labs lists the lab cgroups that exist (for clean: orphans of a crash).
func Labs() ([]string, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(filepath.Join(root, Sub))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, err
}

// NetNamespaces lists the network namespaces of the processes in a cgroup
// and every cgroup below it, one /proc/PID/ns/net path per namespace (a
// Kubernetes node's cgroup: its pods' namespaces, and the node's own).
func NetNamespaces(path string) ([]string, error) {
	seen := map[uint64]bool{}
	var out []string
	err := filepath.WalkDir(path, func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && dir != path {
				return nil // a cgroup removed meanwhile
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		pids, err := Procs(dir)
		if err != nil {
			return nil // removed meanwhile
		}
		for _, pid := range pids {
			ns := fmt.Sprintf("/proc/%d/ns/net", pid)
			ino, err := nsutil.Inode(ns)
			if err != nil || seen[ino] {
				continue
			}
			seen[ino] = true
			out = append(out, ns)
		}
		return nil
	})
	return out, err
}

// PodOf is the cgroup v2 directory of a kubelet pod whose network
// namespace is nsPath, read from a process living in it (the sandbox's
// pause): a process started in that directory is, for the socket
// programs, one of the pod's.
func PodOf(nsPath string) (string, error) {
	want, err := os.Stat(nsPath)
	if err != nil {
		return "", err
	}
	root, err := Root()
	if err != nil {
		return "", err
	}
	pids, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range pids {
		st, err := os.Stat(filepath.Join(p, "ns", "net"))
		if err != nil || !os.SameFile(st, want) {
			continue
		}
		if dir, ok := kubepodsCgroup(filepath.Join(p, "cgroup")); ok {
			return filepath.Join(root, dir), nil
		}
	}
	return "", fmt.Errorf("no pod process in namespace %s", nsPath)
}

// kubepodsCgroup is the cgroup v2 path in a /proc/PID/cgroup file when it
// is one of kubelet's pods'.
func kubepodsCgroup(file string) (string, bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rel, ok := strings.CutPrefix(sc.Text(), "0::"); ok && strings.Contains(rel, "/kubepods") {
			return rel, true
		}
	}
	return "", false
}

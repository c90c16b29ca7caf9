package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// This file serves objects that are not namespaces or links: what a local
// Kubernetes cluster (internal/kube/cluster) built as a lab of mode KubeMode
// leaves on the machine.

// KubeMode is the mode of a lab that is a local Kubernetes cluster.
const KubeMode = "kube"

// Reserve creates and locks the state directory of a lab built outside this
// package (a Kubernetes cluster): its journal, namespaces, processes and
// teardown are the lab's.
func Reserve(name, mode string) (*Lab, error) {
	if err := ValidName("lab", name); err != nil {
		return nil, err
	}
	return reserve(Spec{Name: name, Mode: mode})
}

// CreateNS journals, then creates, a namespace marked as this lab's.
func (l *Lab) CreateNS(name string) error { return l.createNS(name) }

// NSName is the name of the lab's namespace for who (a node, the control plane).
func NSName(lab, who string) string { return nsName(lab, who) }

// TrackProc journals a daemon started for this lab (stopped by PID on teardown).
func (l *Lab) TrackProc(pid int) error { return l.trackProc(pid) }

// Save writes the lab's state (status, nodes, facts).
func (l *Lab) Save() error { return writeState(l.State) }

// Teardown removes everything the lab's journal names (for a build that
// failed halfway) and closes the lab.
func (l *Lab) Teardown(say Progress) error {
	if say == nil {
		say = func(string, ...any) {}
	}
	l.journal.Close()
	err := teardown(l.State.Name, say)
	l.lock.Close()
	return err
}

// sysctlPath is a sysctl's file under /proc/sys.
func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// ReadSysctl reads a sysctl's value as the caller's namespace sees it.
func ReadSysctl(name string) (string, error) {
	b, err := os.ReadFile(sysctlPath(name))
	return strings.TrimSpace(string(b)), err
}

func restoreSysctl(entry string) error {
	name, value, ok := strings.Cut(entry, " ")
	if !ok {
		return nil
	}
	if cur, err := ReadSysctl(name); err == nil && cur == value {
		return nil
	}
	if err := os.WriteFile(sysctlPath(name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("restore sysctl %s=%s: %w", name, value, err)
	}
	return nil
}

// sysctlHolder names another lab whose journal holds machine-wide sysctls
// to restore ("" if none): a local cluster still up, whose kubelet needs
// them as it set them. Its own teardown restores the machine's values
// (it recorded them: kube/cluster's recordSysctls), so this one must not.
func sysctlHolder(name string) string {
	others, err := List()
	if err != nil {
		return ""
	}
	for _, o := range others {
		if o.Name != name && len(JournalValues(o.Name, KindSysctl)) > 0 {
			return o.Name
		}
	}
	return ""
}

// removeDir unmounts everything mounted at or under dir (deepest first), then
// removes it; with a mount left it refuses, so RemoveAll never walks into a
// mounted file system.
func removeDir(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for try := 0; try < 5; try++ {
		mounts := mountsUnder(dir)
		if len(mounts) == 0 {
			break
		}
		for _, m := range mounts {
			_ = unix.Unmount(m, unix.MNT_DETACH)
		}
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("%s still has %d mounts (e.g. %s): not removed", dir, len(left), left[0])
	}
	return os.RemoveAll(dir)
}

// mountsUnder lists mount points at or under dir, deepest first.
func mountsUnder(dir string) []string {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(filepath.Clean(dir)))
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Mountpoint)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// JournalValues returns a lab's journal entries of one kind whose value is
// "KEY VALUE", as a map (the first entry of a key wins).
func JournalValues(name, kind string) map[string]string {
	out := map[string]string{}
	for _, e := range readJournal(name) {
		if e.kind != kind {
			continue
		}
		if k, v, ok := strings.Cut(e.value, " "); ok {
			if _, seen := out[k]; !seen {
				out[k] = v
			}
		}
	}
	return out
}

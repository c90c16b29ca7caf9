package cluster

// What a removed cluster must not leave behind: the tests of this package
// and of internal/kube/proxy check it after every kube down.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/rootns"
)

// MachineState is what a cluster must leave as it found: the sysctls kubelet
// changes, those cilium-agent would change (CiliumLockedSysctls: never, not
// even while the cluster runs), the programs attached to the cgroup v2 root
// (none is ever a cluster's) and whether the fixed paths the daemons use
// exist.
func MachineState() map[string]string {
	out := map[string]string{}
	for _, s := range append(append([]string{}, rootns.KubeletSysctls...), CiliumLockedSysctls...) {
		out[s], _ = lab.ReadSysctl(s)
	}
	if progs, err := cgroup.RootPrograms(); err != nil {
		out[cgroupRootKey] = "error: " + err.Error()
	} else {
		out[cgroupRootKey] = progs
	}
	for _, p := range machinePaths {
		_, err := os.Stat(p)
		out[p] = fmt.Sprint(err == nil)
	}
	return out
}

// cgroupRootKey is MachineState's key of the cgroup v2 root's programs.
const cgroupRootKey = "cgroup v2 root programs"

// Leftovers says what a removed cluster (its daemons, namespaces, state,
// mounts, cgroups, its vnetlab proxies' pins) left on the machine ("" = nothing);
// before == nil skips the machine-wide state (another cluster is running).
func Leftovers(st *lab.State, before map[string]string) string {
	var left []string
	for k, v := range MachineState() {
		if before != nil && before[k] != v {
			left = append(left, fmt.Sprintf("%s=%s (was %s)", k, v, before[k]))
		}
	}
	ents, _ := os.ReadDir(nsutil.Dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), lab.NSName(st.Name, "")) {
			left = append(left, "namespace "+e.Name())
		}
	}
	// Mounts of its namespaces, also beneath a later mount of /run/netns.
	ms, err := nsutil.MountedEntries(lab.NSName(st.Name, ""))
	if err != nil {
		left = append(left, "mountinfo: "+err.Error())
	}
	for _, m := range ms {
		left = append(left, "namespace mount "+m)
	}
	if _, err := os.Stat(lab.Dir(st.Name)); err == nil {
		left = append(left, "state directory "+lab.Dir(st.Name))
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), lab.Dir(st.Name)) {
		left = append(left, "mounts under "+lab.Dir(st.Name))
	}
	for _, n := range st.Nodes {
		if p := filepath.Join(tcbpf.Root, ProxyPlane(st.Name, n.Name)); exists(p) {
			left = append(left, "pins "+p)
		}
	}
	hs, _ := cgroup.KubeHierarchies()
	for _, h := range hs {
		for _, n := range st.Nodes {
			if _, err := os.Stat(filepath.Join(h, cgroup.KubeSub, n.Name)); err == nil {
				left = append(left, "cgroup "+filepath.Join(h, cgroup.KubeSub, n.Name))
			}
		}
	}
	for _, pid := range ProcessesMentioning(lab.Dir(st.Name)) {
		left = append(left, fmt.Sprintf("process %d", pid))
	}
	return strings.Join(left, "; ")
}

// ProcessesMentioning lists processes whose command line contains dir (every
// daemon of a cluster is started with paths under its state directory).
func ProcessesMentioning(dir string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), dir) {
			out = append(out, pid)
		}
	}
	return out
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

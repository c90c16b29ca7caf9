package lab

// Removing a lab: everything its journal names (processes, pins, cgroups,
// namespaces), and only what carries its mark.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Down removes one lab. It waits for nothing: a lab in use is refused.
func Down(name string, say Progress) error {
	if say == nil {
		say = func(string, ...any) {}
	}
	if err := ValidName("lab", name); err != nil {
		return err
	}
	if _, err := os.Stat(labDir(name)); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no lab named %q (see `vnetlab ls`)", name)
	}
	lock, err := lockDir(labDir(name))
	if err != nil {
		return fmt.Errorf("lab %s is in use by another vnetlab process (%v): wait for it, or stop it and run `vnetlab clean`", name, err)
	}
	defer lock.Close()
	return teardown(name, say)
}

// teardown stops the lab's processes, removes its pins and namespaces (only
// those carrying its mark), then its state directory.
func teardown(name string, say Progress) error {
	entries := readJournal(name)
	var errs []string
	// 1. processes we started (by PID + start time), newest first.
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].kind != KindProc {
			continue
		}
		f := strings.Fields(entries[i].value)
		if len(f) != 2 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		start, _ := strconv.ParseUint(f[1], 10, 64)
		proc.Stop(pid, start, 2*time.Second)
	}
	// 2. pins
	for _, e := range entries {
		if e.kind == KindPin {
			if err := os.RemoveAll(e.value); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	_ = os.RemoveAll(filepath.Join(BPFRoot, name))
	// 3. cgroups: their processes (vnetlab's clients) stopped, then rmdir;
	// the lab's own path too, in case its journal entry was never written.
	cgs := map[string]bool{}
	if p, err := cgroup.LabPath(name); err == nil {
		cgs[p] = true
	}
	for _, e := range entries {
		if e.kind == KindCgroup {
			cgs[e.value] = true
		}
	}
	for p := range cgs {
		if err := cgroup.Remove(p); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// cgroup trees (a local Kubernetes node's containers).
	for _, e := range entries {
		if e.kind == KindCgroupTree {
			if err := cgroup.RemoveKubeTree(e.value); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	// 4. namespaces, after stopping any process still living inside them.
	seen := map[string]bool{}
	var nss []string
	for _, e := range entries {
		if e.kind == KindNetns && !seen[e.value] {
			seen[e.value] = true
			nss = append(nss, e.value)
		}
	}
	if err := deleteNamespaces(name, nss); err != nil {
		errs = append(errs, err.Error())
	}
	// 5. what daemons mounted under the state directory (container
	// snapshots, pod network namespaces, volumes), then the directory: never
	// removed through a mount that is still there.
	for _, e := range entries {
		if e.kind == KindDir {
			if err := removeDir(e.value); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if err := removeDir(labDir(name)); err != nil {
		errs = append(errs, err.Error())
	}
	// 6. machine-wide sysctls a daemon changed, back to what they were,
	// unless another lab's daemon still runs with them (the last one restores).
	holder := sysctlHolder(name)
	for _, e := range entries {
		if e.kind != KindSysctl {
			continue
		}
		if holder != "" {
			say("lab %s: sysctl %s left as it is while lab %s runs (it restores it when it goes)", name, strings.Fields(e.value)[0], holder)
			continue
		}
		if err := restoreSysctl(e.value); err != nil {
			errs = append(errs, err.Error())
		}
	}
	say("lab %s removed (%d namespaces)", name, len(nss))
	if len(errs) > 0 {
		return fmt.Errorf("lab %s: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// deleteNamespaces removes the lab's namespaces in three passes: check
// them all (still a namespace, marked as this lab's), stop any process
// living in them (one pass over /proc), then unmount them all. Unmounting
// is all a deletion takes from us: the kernel frees a namespace once
// nothing holds it, asynchronously, and frees namespaces released together
// in one batch (one RCU grace period and one pass unregistering their
// devices, rather than one each). Checks come first because reading a mark
// needs the RTNL lock, which that cleanup holds for long stretches.
func deleteNamespaces(lab string, nss []string) error {
	var errs []string
	var ours []string
	for _, n := range nss {
		if !nsutil.Exists(n) {
			continue
		}
		if !nsutil.IsNamespace(n) {
			// Killed between creating the mount point and mounting it, or
			// a stale entry (its namespace still mounted beneath a later
			// mount of /run/netns): nsutil.Delete removes both.
			if err := nsutil.Delete(n); err != nil {
				errs = append(errs, err.Error())
			}
			continue
		}
		// Journaled by this lab and marked by it (or killed before the mark was set).
		if got := LabOfMark(nsutil.Mark(n)); got != lab && got != "" {
			// Not ours (or someone reused the name): never touch it.
			errs = append(errs, fmt.Sprintf("namespace %s is not marked as lab %s's; left alone", n, lab))
			continue
		}
		ours = append(ours, n)
	}
	if err := removeNamespaces(ours); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// removeNamespaces stops the processes living in namespaces vnetlab
// created (an iperf3 server left by a killed `run`, for instance), each by
// its PID, then unmounts the namespaces, several at a time: each unmount
// waits for an RCU grace period, and concurrent waits share one.
func removeNamespaces(nss []string) error {
	inodes := map[uint64]bool{}
	for _, n := range nss {
		if ino, err := nsutil.Inode(nsutil.Path(n)); err == nil {
			inodes[ino] = true
		}
	}
	for _, pids := range proc.InNamespaces(inodes) {
		for _, pid := range pids {
			if start, err := proc.StartTime(pid); err == nil {
				proc.Stop(pid, start, time.Second)
			}
		}
	}
	return inParallel(context.Background(), nss, nsutil.Delete)
}

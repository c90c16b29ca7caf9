package lab

// Clean: the sweep after crashes (labs nobody holds, marked namespaces
// whose lab has no state left, orphan cgroups and pins).

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// CleanReport says what clean did.
type CleanReport struct {
	Labs    []string `json:"labs_removed"`
	Orphans []string `json:"orphan_namespaces_removed"`
	// Stale are vnl- entries of /run/netns that are no namespace any more
	// ("Invalid argument" when entered): what an older vnetlab's down left
	// when another tool had re-mounted /run/netns (nsutil's mounts.go).
	Stale      []string `json:"stale_namespace_entries_removed"`
	Busy       []string `json:"labs_in_use_skipped"`
	PinsPruned []string `json:"pins_removed"`
	Cgroups    []string `json:"orphan_cgroups_removed,omitempty"`
	Errors     []string `json:"errors,omitempty"`
}

// Clean removes every lab no live vnetlab process is using, then any namespace
// marked as vnetlab's whose lab has no state left (a crash between steps).
func Clean(say Progress) (*CleanReport, error) {
	if say == nil {
		say = func(string, ...any) {}
	}
	rep := &CleanReport{}
	unlock, err := globalLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	ents, _ := os.ReadDir(filepath.Join(StateRoot, "labs"))
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		lock, err := lockDir(labDir(e.Name()))
		if errors.Is(err, unix.EWOULDBLOCK) {
			rep.Busy = append(rep.Busy, e.Name())
			say("lab %s is in use by a running vnetlab; skipped", e.Name())
			continue
		}
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			continue
		}
		if err := teardown(e.Name(), say); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
		lock.Close()
		rep.Labs = append(rep.Labs, e.Name())
	}
	live := map[string]bool{}
	for _, b := range rep.Busy {
		live[b] = true
	}
	nsEnts, _ := os.ReadDir(nsutil.Dir)
	for _, e := range nsEnts {
		if !strings.HasPrefix(e.Name(), NSPrefix) {
			continue
		}
		if !nsutil.IsNamespace(e.Name()) {
			if !ofLiveLab(e.Name(), live) {
				rep.Stale = append(rep.Stale, e.Name())
			}
			continue
		}
		owner := LabOfMark(nsutil.Mark(e.Name()))
		if owner == "" || live[owner] {
			continue
		}
		rep.Orphans = append(rep.Orphans, e.Name())
	}
	if err := removeNamespaces(rep.Orphans); err != nil {
		rep.Errors = append(rep.Errors, err.Error())
	}
	for _, n := range rep.Stale {
		if err := nsutil.Delete(n); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
	}
	cgs, _ := cgroup.Labs()
	for _, cg := range cgs {
		if live[cg] {
			continue
		}
		if _, err := os.Stat(labDir(cg)); err == nil {
			continue // a lab that is still there (its teardown failed above)
		}
		if path, err := cgroup.LabPath(cg); err == nil {
			if err := cgroup.Remove(path); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			} else {
				rep.Cgroups = append(rep.Cgroups, cg)
			}
		}
	}
	pins, _ := os.ReadDir(BPFRoot)
	for _, p := range pins {
		// "LAB_NODE": a local cluster node's Service maps (kube/cluster.ProxyPlane).
		if owner, _, _ := strings.Cut(p.Name(), "_"); live[owner] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(BPFRoot, p.Name())); err == nil {
			rep.PinsPruned = append(rep.PinsPruned, p.Name())
		}
	}
	if len(rep.Errors) > 0 {
		return rep, errors.New(strings.Join(rep.Errors, "; "))
	}
	return rep, nil
}

// ofLiveLab: an entry that may be a running lab's namespace being created
// (its file exists before its mount): left alone.
func ofLiveLab(entry string, live map[string]bool) bool {
	for l := range live {
		if strings.HasPrefix(entry, nsName(l, "")) {
			return true
		}
	}
	return false
}

package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Lab is a lab this process holds the lock of.
type Lab struct {
	State   *State
	journal *Journal
	lock    *os.File
}

// Release drops the lock (the lab stays up).
func (l *Lab) Release() {
	if l.journal != nil {
		l.journal.Close()
	}
	if l.lock != nil {
		l.lock.Close()
	}
}

// Journal gives access to the lab's journal (to record processes, pins, ...).
func (l *Lab) Journal() *Journal { return l.journal }

// Progress receives one line per step of a long operation.
type Progress func(format string, args ...any)

// Up validates spec and builds the lab. On any failure, or if ctx is
// cancelled, everything already built is removed before returning.
func Up(ctx context.Context, spec Spec, say Progress) (*Lab, error) {
	if say == nil {
		say = func(string, ...any) {}
	}
	mode, err := spec.resolve()
	if err != nil {
		return nil, err
	}
	if _, pn, _ := net.ParseCIDR(spec.PodCIDR); pn.Contains(underlay.IP) || underlay.Contains(pn.IP) {
		return nil, fmt.Errorf("address clash: pod_cidr %s overlaps vnetlab's node underlay %s: pick another pod_cidr", spec.PodCIDR, underlay)
	}
	l, err := reserve(spec)
	if err != nil {
		return nil, err
	}
	if err := build(ctx, l, mode, say); err != nil {
		l.journal.Close()
		_ = teardown(l.State.Name, say)
		l.lock.Close()
		return nil, err
	}
	l.State.Status = "ready"
	if err := writeState(l.State); err != nil {
		return nil, err
	}
	return l, nil
}

// reserve creates the lab directory (atomic: a taken name fails) and locks it.
func reserve(spec Spec) (*Lab, error) {
	unlock, err := globalLock()
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", StateRoot, err)
	}
	defer unlock()
	dir := labDir(spec.Name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			owner := ""
			if st, lerr := Load(spec.Name); lerr == nil {
				owner = fmt.Sprintf(" (mode %s, created %s)", st.Mode, st.Created.Format(time.RFC3339))
			}
			return nil, fmt.Errorf("lab %q already exists%s: choose another --name or run `vnetlab down %s`", spec.Name, owner, spec.Name)
		}
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	j, err := openJournal(spec.Name)
	if err != nil {
		lock.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	st := &State{Name: spec.Name, Mode: spec.Mode, Status: "building", Created: time.Now().UTC(),
		OwnerPID: os.Getpid(), Spec: spec, Ext: nsName(spec.Name, "ext")}
	if err := writeState(st); err != nil {
		lock.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &Lab{State: st, journal: j, lock: lock}, nil
}

// trackProc journals a daemon a mode started (ovs-vswitchd, the tap switch):
// teardown stops it by PID and start time, also after `up` was killed.
func (l *Lab) trackProc(pid int) error {
	start, err := proc.StartTime(pid)
	if err != nil {
		return fmt.Errorf("process %d exited right after it started: %w", pid, err)
	}
	return l.journal.RecordProc(pid, start)
}

// ErrInUse is Open's and OpenShared's refusal while another process holds
// the lab in a way that excludes theirs.
var ErrInUse = errors.New("in use by another vnetlab process")

// Open locks an existing lab for exclusive use (run, svc changes).
func Open(name string) (*Lab, error) {
	st, err := Load(name)
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(labDir(name))
	if err != nil {
		return nil, fmt.Errorf("lab %s is %w: %v", name, ErrInUse, err)
	}
	j, err := openJournal(name)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return &Lab{State: st, journal: j, lock: lock}, nil
}

// OpenShared holds an existing lab for a use that changes nothing of its
// own (a local cluster's kube converge): any number of such holders at
// once, while Open (set-proxy, a Service change), Down and clean are
// refused until each has released it; refused itself while one of those
// holds it. Its Lab has no journal.
func OpenShared(name string) (*Lab, error) {
	st, err := Load(name)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(labDir(name))
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lab %s is %w: %v", name, ErrInUse, err)
	}
	// Read again under the lock: a holder before it may have changed it.
	if st, err = Load(name); err != nil {
		f.Close()
		return nil, err
	}
	return &Lab{State: st, lock: f}, nil
}

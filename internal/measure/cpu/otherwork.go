package cpu

import (
	"fmt"
	"os"
	"time"

	"github.com/prometheus/procfs"
)

// pfKthread is a kernel thread's flag in /proc/PID/stat (PF_KTHREAD).
const pfKthread = 0x00200000

// OtherWork is a reading of the CPU time used so far by the machine's
// other work: every process in the caller's network namespace (the
// machine's: vnetlab runs in it), kernel threads excepted, that is neither one of the measured system's
// own processes nor descended from one (OtherWorkOf's roots). What a local
// cluster runs is in the nodes' and pods' namespaces, or one of its roots;
// what else runs here (a compile, a shell's loop, another tool) is in the
// machine's namespace.
//
// Each process counts its own time and that of its children it reaped
// (utime + stime + cutime + cstime), so the sum over processes is kept
// across exits: a compile that starts and ends between two readings is in
// their difference (OtherWork.Sub), through the shell that reaped it.
type OtherWork struct {
	At    time.Time
	Total time.Duration
	own   map[procKey]procOwn
}

// procKey names a process across PID reuse.
type procKey struct {
	pid   int
	start uint64
}

// procOwn is one process's name and its own CPU time (its threads').
type procOwn struct {
	comm string
	cpu  time.Duration
}

// OtherWorkOf reads the other work now: the machine's namespace's
// processes outside roots and their descendants (a measuring tool is one
// of its roots: what it starts is not other work).
func OtherWorkOf(roots []int) (OtherWork, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return OtherWork{}, err
	}
	netNS, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return OtherWork{}, fmt.Errorf("the network namespace: %w", err)
	}
	// Only the namespace's processes are read: a process elsewhere is the
	// cluster's, or another namespace's (its time counts once reaped by
	// a parent here).
	stats := make(map[int]procfs.ProcStat, len(procs))
	for _, p := range procs {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", p.PID)); err != nil || ns != netNS {
			continue
		}
		if s, err := p.Stat(); err == nil { // a process gone meanwhile: its time is its reaper's
			stats[s.PID] = s
		}
	}
	inside := map[int]bool{}
	for _, r := range roots {
		inside[r] = true
	}
	var within func(pid int, depth int) bool
	within = func(pid, depth int) bool {
		if inside[pid] {
			return true
		}
		s, ok := stats[pid]
		if !ok || pid <= 1 || depth > 64 {
			return false
		}
		return within(s.PPID, depth+1)
	}
	w := OtherWork{At: time.Now(), own: map[procKey]procOwn{}}
	tick := func(t float64) time.Duration { return time.Duration(t / userHZ * float64(time.Second)) }
	for pid, s := range stats {
		if s.Flags&pfKthread != 0 || within(pid, 0) {
			continue
		}
		own := tick(float64(s.UTime + s.STime))
		w.Total += own + tick(float64(s.CUTime+s.CSTime))
		w.own[procKey{pid, s.Starttime}] = procOwn{comm: s.Comm, cpu: own}
	}
	return w, nil
}

// Sub is the other work between before and w: its CPU time, and the CPU
// time by process name of the processes seen in both readings or started
// since, by their own time (a process that lived only between them is in
// the total, through its reaper, but not by its name).
func (w OtherWork) Sub(before OtherWork) (time.Duration, map[string]time.Duration) {
	byName := map[string]time.Duration{}
	for k, o := range w.own {
		if d := o.cpu - before.own[k].cpu; d > 0 {
			byName[o.comm] += d
		}
	}
	return w.Total - before.Total, byName
}

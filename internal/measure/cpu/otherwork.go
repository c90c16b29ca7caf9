package cpu

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// pfKthread is a kernel thread's flag in /proc/PID/stat (PF_KTHREAD).
const pfKthread = 0x00200000

// OtherWork is a reading of the CPU time used so far by the machine's
// other work: every process, kernel threads excepted, that is not the
// measured system's (Measured). On one machine, that is a compile, a
// shell's loop, another tool, another lab or cluster.
//
// Each process counts its own time and that of its children it reaped
// (utime + stime + cutime + cstime), so the sum over processes is kept
// across exits: a compile that starts and ends between two readings is in
// their difference (OtherWork.Sub), through the shell that reaped it.
//
// The same holds the other way: a measured process whose parent is not
// measured (a cluster's containerd shim, whose parent is the machine's
// init) brings its whole time into that parent's when it exits. A reading
// keeps the measured processes' whole times, and Sub takes out those of
// the ones that left under a parent outside.
type OtherWork struct {
	At       time.Time
	Total    time.Duration
	own      map[procKey]procOwn
	measured map[procKey]measuredProc
}

// Measured names the measured system's processes, which a reading leaves
// out: Roots and their descendants; the processes in the network
// namespaces of Roots other than the caller's (a cluster's nodes: their
// daemons' children, such as containerd's shims, are the init process's
// once their parent exits); and those in Cgroups or below (a cluster's
// pods, each in a namespace of its own), as /proc/PID/cgroup names them.
// A measuring tool's own PID is one of Roots: what it starts is not other
// work.
type Measured struct {
	Roots   []int
	Cgroups []string
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

// measuredProc is a measured process's whole CPU time (its own and its
// reaped children's), and whether its parent is outside the measured
// system (that parent reaps it).
type measuredProc struct {
	whole         time.Duration
	parentOutside bool
}

// OtherWorkOf reads the other work now: the machine's processes but m's.
func OtherWorkOf(m Measured) (OtherWork, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return OtherWork{}, err
	}
	netNS := func(pid int) string { ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); return ns }
	own := netNS(os.Getpid())
	inside, insideNS := map[int]bool{}, map[string]bool{}
	for _, r := range m.Roots {
		inside[r] = true
		if ns := netNS(r); ns != "" && ns != own {
			insideNS[ns] = true
		}
	}
	stats := make(map[int]procfs.ProcStat, len(procs))
	byPID := make(map[int]procfs.Proc, len(procs))
	inNS := map[int]bool{}
	for _, p := range procs {
		if s, err := p.Stat(); err == nil && s.Flags&pfKthread == 0 { // a process gone meanwhile: its time is its reaper's
			stats[s.PID], byPID[s.PID] = s, p
			inNS[s.PID] = insideNS[netNS(p.PID)]
		}
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
	isMeasured := make(map[int]bool, len(stats))
	for pid := range stats {
		isMeasured[pid] = inNS[pid] || within(pid, 0) || inCgroups(byPID[pid], m.Cgroups)
	}
	w := OtherWork{At: time.Now(), own: map[procKey]procOwn{}, measured: map[procKey]measuredProc{}}
	tick := func(t float64) time.Duration { return time.Duration(t / userHZ * float64(time.Second)) }
	for pid, s := range stats {
		own := tick(float64(s.UTime + s.STime))
		whole := own + tick(float64(s.CUTime+s.CSTime))
		if isMeasured[pid] {
			w.measured[procKey{pid, s.Starttime}] = measuredProc{whole: whole, parentOutside: !isMeasured[s.PPID]}
			continue
		}
		w.Total += whole
		w.own[procKey{pid, s.Starttime}] = procOwn{comm: s.Comm, cpu: own}
	}
	return w, nil
}

// inCgroups says whether p is in one of cgroups or below, in any
// hierarchy of its /proc/PID/cgroup.
func inCgroups(p procfs.Proc, cgroups []string) bool {
	if len(cgroups) == 0 {
		return false
	}
	groups, err := p.Cgroups()
	if err != nil {
		return false
	}
	for _, g := range groups {
		for _, cg := range cgroups {
			if g.Path == cg || strings.HasPrefix(g.Path, cg+"/") {
				return true
			}
		}
	}
	return false
}

// Sub is the other work between before and w: its CPU time, and the CPU
// time by process name of the processes seen in both readings or started
// since, by their own time (a process that lived only between them is in
// the total, through its reaper, but not by its name). The whole time of a
// measured process that left under a parent outside, as before read it, is
// taken out: what it used after that reading, or a measured process that
// lived only between them, is not.
func (w OtherWork) Sub(before OtherWork) (time.Duration, map[string]time.Duration) {
	byName := map[string]time.Duration{}
	for k, o := range w.own {
		if d := o.cpu - before.own[k].cpu; d > 0 {
			byName[o.comm] += d
		}
	}
	total := w.Total - before.Total
	for k, p := range before.measured {
		if _, alive := w.measured[k]; !alive && p.parentOutside {
			total -= p.whole
		}
	}
	return max(total, 0), byName
}

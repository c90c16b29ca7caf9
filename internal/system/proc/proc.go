// Package proc starts programs inside network namespaces and stops them by PID,
// checking the PID still names the process we started (start time), never by name.
package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Command builds an exec.Cmd that will run inside namespace ns ("" = the
// caller's). Processes die with vnetlab (Pdeathsig) unless Detach is called.
func Command(ctx context.Context, ns string, name string, args ...string) *Cmd {
	c := exec.CommandContext(ctx, name, args...)
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGKILL) }
	return &Cmd{Cmd: c, NS: ns}
}

// Cmd is an exec.Cmd bound to a namespace.
type Cmd struct {
	*exec.Cmd
	NS     string
	cgroup *os.File
	cpu    int // 1 + the CPU to start on; 0: anywhere
}

// PinTo makes the process start pinned to one CPU: it inherits the mask
// before its first instruction, every thread it starts too.
func (c *Cmd) PinTo(cpu int) { c.cpu = cpu + 1 }

// Detach lets the process outlive vnetlab (for lab daemons recorded in the journal).
func (c *Cmd) Detach() { c.SysProcAttr.Pdeathsig = 0 }

// InCgroup makes the process start inside a cgroup v2 directory (clone3
// with CLONE_INTO_CGROUP: it never runs a single instruction elsewhere),
// e.g. a lab's cgroup, where socket-level Service programs act.
func (c *Cmd) InCgroup(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	if c.cgroup != nil {
		c.cgroup.Close()
	}
	c.cgroup = f
	c.SysProcAttr.UseCgroupFD = true
	c.SysProcAttr.CgroupFD = int(f.Fd())
	return nil
}

// Start starts the process inside its namespace: the fork happens from a
// thread that has entered the namespace, so the child inherits it.
func (c *Cmd) Start() error {
	inheritedOnce.Do(closeInheritedOnExec)
	if c.cgroup != nil {
		defer func() { c.cgroup.Close(); c.cgroup = nil }()
	}
	start := c.Cmd.Start
	if c.cpu > 0 {
		start = func() error { return cpupin.StartOn(c.cpu-1, c.Cmd.Start) }
	}
	if c.NS == "" {
		return start()
	}
	return nsutil.Do(c.NS, start)
}

var inheritedOnce sync.Once

// closeInheritedOnExec marks the descriptors vnetlab inherited beyond 0-2
// close-on-exec, so that the processes it starts never hold them: a lab's
// daemons outlive vnetlab, and a lock file held by whoever started it
// (`flock LOCK vnetlab kube up`) would otherwise stay locked until the
// cluster is torn down. Go opens its own descriptors close-on-exec already.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// Run starts and waits.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// Output runs the command and returns stdout; stderr is folded into the error.
func (c *Cmd) Output() ([]byte, error) {
	var out, errb bytes.Buffer
	c.Stdout = &out
	c.Stderr = &errb
	err := c.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s: %w: %s", c.Path, err, Said(errb.String(), out.String()))
	}
	return out.Bytes(), nil
}

// Nft runs one nft transaction, script on `nft -f -`, in namespace ns
// ("": the caller's).
func Nft(ns, script string) error {
	c := Command(context.Background(), ns, "nft", "-f", "-")
	c.Stdin = bytes.NewBufferString(script)
	if _, err := c.Output(); err != nil {
		where := ns
		if where == "" {
			where = "this namespace"
		}
		return fmt.Errorf("nft -f in %s: %w", where, err)
	}
	return nil
}

// NftDropTable is the nft script that deletes table ("FAMILY NAME")
// whether or not it exists ("add" first: deleting a table that does not
// exist is an error): alone, a removal; at a script's start, a
// replacement in one transaction.
func NftDropTable(table string) string {
	return fmt.Sprintf("add table %s\ndelete table %s\n", table, table)
}

// CombinedOutput runs the command inside its namespace and returns its
// stdout and stderr together (exec.Cmd's own, promoted through the
// embedding, would start it in vnetlab's namespace).
func (c *Cmd) CombinedOutput() ([]byte, error) {
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	return b.Bytes(), err
}

// Said is what a failed program said, for its error: its stderr, else its
// stdout, trimmed and cut at 400 bytes.
func Said(stderr, stdout string) string {
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		msg = strings.TrimSpace(stdout)
	}
	if len(msg) > 400 {
		msg = msg[:400] + "..."
	}
	return msg
}

// StartTime returns the process start time in clock ticks since boot
// (field 22 of /proc/PID/stat); together with the PID it names one process.
func StartTime(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// statFields are /proc/PID/stat's fields from the third (state) on: comm
// may contain spaces, so they start after the last ')'.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return f, nil
}

// group is pid's process group (field 5 of /proc/PID/stat).
func group(pid int) (int, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[2])
}

// StopGroup stops the process pid started at startTime (Stop), then what
// is left of the process group it leads, each member by its PID and start
// time: the programs it ran, which it may leave running (kube-proxy
// stopped mid-sync left its iptables-restore writing 30,000 Services'
// rules for minutes, after the next proxy had cleaned the node). A
// process started with Command leads its own group, which holds only
// what it started; a pid that leads no group is stopped alone.
func StopGroup(pid int, startTime uint64, grace time.Duration) {
	pg, err := group(pid)
	leads := err == nil && pg == pid && Alive(pid, startTime)
	Stop(pid, startTime, grace)
	if !leads {
		return
	}
	// While a member lives, the kernel gives no new process pid as its
	// group: every process of group pid is the stopped leader's.
	others, err := otherPIDs()
	if err != nil {
		return
	}
	for _, m := range others {
		if g, err := group(m); err == nil && g == pid && m != pid {
			if st, err := StartTime(m); err == nil {
				Stop(m, st, grace)
			}
		}
	}
}

// Alive reports whether pid still names the process started at startTime.
func Alive(pid int, startTime uint64) bool {
	st, err := StartTime(pid)
	return err == nil && st == startTime
}

// Stop sends SIGTERM, waits up to grace, then SIGKILL; only if pid still is
// the process identified by startTime.
func Stop(pid int, startTime uint64, grace time.Duration) {
	if !Alive(pid, startTime) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !Alive(pid, startTime) || isZombie(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	if Alive(pid, startTime) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func isZombie(pid int) bool {
	f, err := statFields(pid)
	return err != nil || f[0] == "Z"
}

// InNamespace lists PIDs whose network namespace has the given inode: these
// processes live inside a namespace vnetlab created.
func InNamespace(inode uint64) []int {
	return InNamespaces(map[uint64]bool{inode: true})[inode]
}

// InNamespaces is InNamespace for several namespaces in one pass over /proc
// (a lab of 1000 pods would otherwise read it 1000 times).
func InNamespaces(inodes map[uint64]bool) map[uint64][]int {
	others, err := otherPIDs()
	if err != nil {
		return nil
	}
	pids := map[uint64][]int{}
	for _, pid := range others {
		ino, err := nsutil.Inode(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err == nil && inodes[ino] {
			pids[ino] = append(pids[ino], pid)
		}
	}
	return pids
}

// HoldingBPFMaps lists the processes, other than this one, holding a
// descriptor of one of the eBPF maps ids (fdinfo's map_id): a running
// program's user, such as a Service proxy filling the maps.
func HoldingBPFMaps(ids map[uint32]bool) []int {
	others, err := otherPIDs()
	if err != nil {
		return nil
	}
	var out []int
	for _, pid := range others {
		if holdsMap(pid, ids) {
			out = append(out, pid)
		}
	}
	return out
}

func holdsMap(pid int, ids map[uint32]bool) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(dir + "/" + fd.Name()); err != nil || target != "anon_inode:bpf-map" {
			continue
		}
		info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, fd.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "map_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil && ids[uint32(id)] {
					return true
				}
			}
		}
	}
	return false
}

// otherPIDs lists the machine's processes other than this one, as /proc
// names them.
func otherPIDs() ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	self := os.Getpid()
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

package cpu

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// burn runs a shell that spins for about half a second of CPU and returns
// the CPU time it used.
func burn(t *testing.T) time.Duration {
	t.Helper()
	c := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.ProcessState.UserTime() + c.ProcessState.SystemTime()
}

// readOther is a reading of the other work, m's left out.
func readOther(t *testing.T, m Measured) OtherWork {
	t.Helper()
	w, err := OtherWorkOf(m)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// inNewNetns runs sh's script in a new network namespace, beside a sleep
// it starts there first (the sleep is not the shell's ancestor: only the
// namespace makes the shell the sleep's system's), and returns the shell,
// its standard input, its output after the sleep's PID, and that PID.
// The shell and the sleep are killed when the test ends.
func inNewNetns(t *testing.T, script string) (*exec.Cmd, io.WriteCloser, io.Reader, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a network namespace of its own needs root")
	}
	c := exec.Command("unshare", "-n", "sh", "-c", "sleep 60 & echo $!; "+script)
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	var sleep int
	if _, err := fmt.Fscan(out, &sleep); err != nil {
		t.Fatalf("the sleep's PID: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(sleep, syscall.SIGKILL) })
	return c, in, out, sleep
}

// A process that starts and ends between two readings is other work,
// through the process that reaped it (here the test's), unless that
// process is a root; a process seen in both readings is named. The
// machine's other processes only add to a reading's difference, so each
// check is a lower bound: without roots against with them, the second
// pair of readings nested in the first.
func TestOtherWork(t *testing.T) {
	read := func(roots ...int) OtherWork { t.Helper(); return readOther(t, Measured{Roots: roots}) }
	all, mine := read(), read(os.Getpid())
	used := burn(t)
	withRoot, _ := read(os.Getpid()).Sub(mine)
	without, _ := read().Sub(all)
	t.Logf("the shell used %v; other work %v, with the test a root %v", used, without, withRoot)
	if used < 100*time.Millisecond {
		t.Fatalf("the shell used %v of CPU, too little to tell", used)
	}
	if without < used*9/10 {
		t.Errorf("other work %v while a reaped shell used %v: its time was lost", without, used)
	}
	if without-withRoot < used*8/10 {
		t.Errorf("other work %v, %v with the test a root, whose child used %v: a root's descendants were counted", without, withRoot, used)
	}

	// A process that lives across both readings is named.
	c := exec.Command("sh", "-c", "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	time.Sleep(200 * time.Millisecond)
	before := read()
	time.Sleep(time.Second)
	_, names := read().Sub(before)
	if names["sh"] < 300*time.Millisecond {
		t.Errorf("other work by name %v: want sh with most of a second", names)
	}
}

// A process in a namespace of one of the roots (a cluster's node: a
// containerd shim, whose parent is the init process) is the measured
// system's; in another namespace, with no root there, it is other work.
func TestOtherWorkNamespaces(t *testing.T) {
	_, _, _, sleep := inNewNetns(t, "while :; do :; done")
	// Readings without roots around readings with the sleep a root: the
	// loop's two seconds are in the first pair's difference only.
	shells := func(after, before OtherWork) time.Duration { _, names := after.Sub(before); return names["sh"] }
	measured := Measured{Roots: []int{sleep}}
	all, mine := readOther(t, Measured{}), readOther(t, measured)
	time.Sleep(2 * time.Second)
	withRoot := shells(readOther(t, measured), mine)
	without := shells(readOther(t, Measured{}), all)
	t.Logf("shells' other work %v, %v with the sleep in the namespace a root", without, withRoot)
	if without < 300*time.Millisecond {
		t.Errorf("a shell looping in a namespace of no root: %v of other work, want most of two seconds", without)
	}
	if without-withRoot < 300*time.Millisecond {
		t.Errorf("a shell looping in a root's namespace: %v of other work, %v without the root: it was counted", withRoot, without)
	}
}

// A measured process whose parent is not measured (a cluster's shim, whose
// parent is the machine's init) brings its whole time into that parent's
// when it exits and is reaped: that time is the measured system's, not
// other work. Here the measured process is a shell in a root's namespace,
// the test its unmeasured parent.
func TestOtherWorkReapedOutside(t *testing.T) {
	c, in, out, sleep := inNewNetns(t, "i=0; while [ $i -lt 500000 ]; do i=$((i+1)); done; echo burnt; read x || :")
	var burnt string
	if _, err := fmt.Fscan(out, &burnt); err != nil || burnt != "burnt" {
		t.Fatalf("the shell's loop: %q, %v", burnt, err)
	}
	// Readings without roots around readings with the sleep a root: the
	// shell's time is in the outer pair's readings both (it ended nothing
	// for them: its own time became its reaper's), and must not enter the
	// inner pair's difference when it leaves the measured system.
	measured := Measured{Roots: []int{sleep}}
	all, mine := readOther(t, Measured{}), readOther(t, measured)
	_ = in.Close()
	if err := c.Wait(); err != nil {
		t.Fatalf("the shell: %v", err)
	}
	used := c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	withRoot, _ := readOther(t, measured).Sub(mine)
	without, _ := readOther(t, Measured{}).Sub(all)
	t.Logf("the measured shell used %v and was reaped by the test; other work between %v, %v with the sleep in its namespace a root", used, without, withRoot)
	if used < 150*time.Millisecond {
		t.Fatalf("the shell used %v of CPU, too little to tell", used)
	}
	if withRoot > without+used/2 {
		t.Errorf("other work %v across the exit of a measured shell that used %v (%v without roots): its reaper's share was counted", withRoot, used, without)
	}
}

package cpu

import (
	"fmt"
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

// A process that starts and ends between two readings is other work,
// through the process that reaped it (here the test's), unless that
// process is a root; a process seen in both readings is named.
func TestOtherWork(t *testing.T) {
	read := func(roots ...int) OtherWork {
		t.Helper()
		w, err := OtherWorkOf(Measured{Roots: roots})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	before := read()
	used := burn(t)
	got, _ := read().Sub(before)
	t.Logf("the shell used %v; other work %v", used, got)
	if used < 100*time.Millisecond {
		t.Fatalf("the shell used %v of CPU, too little to tell", used)
	}
	if got < used*9/10 {
		t.Errorf("other work %v while a reaped shell used %v: its time was lost", got, used)
	}

	before = read(os.Getpid())
	used = burn(t)
	if got, _ = read(os.Getpid()).Sub(before); got > used/2 {
		t.Errorf("other work %v, a root's child using %v: a root's descendants were counted", got, used)
	}

	// A process that lives across both readings is named.
	c := exec.Command("sh", "-c", "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Process.Kill()
	time.Sleep(200 * time.Millisecond)
	before = read()
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
	if os.Geteuid() != 0 {
		t.Skip("a network namespace of its own needs root")
	}
	// sh loops in a new namespace, beside a sleep it started (sleep is not
	// its ancestor: only the namespace makes sh the sleep's system's).
	c := exec.Command("unshare", "-n", "sh", "-c", "sleep 60 & echo $!; while :; do :; done")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	var sleep int
	if _, err := fmt.Fscan(out, &sleep); err != nil {
		t.Fatalf("the sleep's PID: %v", err)
	}
	defer syscall.Kill(sleep, syscall.SIGKILL)
	used := func(m Measured) time.Duration {
		t.Helper()
		before, err := OtherWorkOf(m)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		after, err := OtherWorkOf(m)
		if err != nil {
			t.Fatal(err)
		}
		_, names := after.Sub(before)
		return names["sh"]
	}
	if d := used(Measured{}); d < 300*time.Millisecond {
		t.Errorf("a shell looping in a namespace of no root: %v of other work, want most of a second", d)
	}
	if d := used(Measured{Roots: []int{sleep}}); d > 0 {
		t.Errorf("a shell looping in a root's namespace: %v of other work, want none", d)
	}
}

package cpu

import (
	"os"
	"os/exec"
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
		w, err := OtherWorkOf(roots)
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

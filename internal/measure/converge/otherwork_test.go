package converge

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/results"
)

// A measured process that starts after a phase began and ends before it
// ends, reaped outside the measured system (a cluster's shim under the
// machine's init; here a shell in a root's namespace, reaped by the test),
// is not the phase's other work: the phase sums its samples, and the
// sample across the exit takes the shell's time out. Without roots, the
// shell is other work: a meter of that, around the first, holds the
// machine's other work too, so their difference is the shell's.
func TestOtherMeterPhaseSumsSamples(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a network namespace of its own needs root")
	}
	// The root: a sleep in a namespace of its own, there before the phase.
	root := exec.Command("unshare", "-n", "sleep", "60")
	if err := root.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = root.Process.Kill(); _ = root.Wait() }()
	ns := func(pid int) string { l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); return l }
	for deadline := time.Now().Add(5 * time.Second); ns(root.Process.Pid) == ns(os.Getpid()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("unshare made no namespace in 5 s")
		}
	}
	all, o := NewOtherMeter(cpu.Measured{}), NewOtherMeter(cpu.Measured{Roots: []int{root.Process.Pid}})
	all.Begin()
	o.Begin()

	// The shell joins the root's namespace after the phase began.
	sh := exec.Command("nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", root.Process.Pid), "--",
		"sh", "-c", "i=0; while [ $i -lt 500000 ]; do i=$((i+1)); done; echo burnt; read x || :")
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sh.Process.Kill(); _ = sh.Wait() }()
	var burnt string
	if _, err := fmt.Fscan(out, &burnt); err != nil || burnt != "burnt" {
		t.Fatalf("the shell's loop: %q, %v", burnt, err)
	}
	o.Tick(time.Now().Add(OtherWorkEvery)) // a sample sees the shell
	all.Tick(time.Now().Add(OtherWorkEvery))
	_ = in.Close()
	if err := sh.Wait(); err != nil {
		t.Fatalf("the shell: %v", err)
	}
	used := sh.ProcessState.UserTime() + sh.ProcessState.SystemTime()
	o.End(results.PhaseChanges)
	all.End(results.PhaseChanges)
	phase := func(o *OtherMeter) time.Duration {
		return time.Duration(o.Result().Phases[results.PhaseChanges] * float64(time.Second))
	}
	got, without := phase(o), phase(all)
	t.Logf("the measured shell used %v; the phase's other work %v in %d samples, %v without roots", used, got, len(o.Result().Samples), without)
	if used < 150*time.Millisecond {
		t.Fatalf("the shell used %v of CPU, too little to tell", used)
	}
	if len(o.Result().Samples) != 2 {
		t.Errorf("%d samples, want 2 (the tick's and the end's)", len(o.Result().Samples))
	}
	if without-got < used/2 {
		t.Errorf("the phase's other work %v (%v without roots), beside a measured shell that used %v and ended within it: its reaper's share was counted", got, without, used)
	}
}

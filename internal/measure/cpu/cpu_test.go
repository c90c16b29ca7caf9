package cpu

import (
	"math"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const statA = `cpu  4641 10 3857 157547 367 5 477 13 0 0
cpu0 1692 0 1564 79949 24 0 199 3 0 0
intr 1 2 3
`

const statB = `cpu  4741 20 4057 157647 377 7 577 15 0 0
cpu0 1692 0 1564 79949 24 0 199 3 0 0
`

const sirqA = `                    CPU0       CPU1
          HI:          0          0
      NET_TX:       1213        188
      NET_RX:     413401     474006
`

const sirqB = `                    CPU0       CPU1
      NET_TX:       1300        200
      NET_RX:     413501     474106
`

func TestParseAndSub(t *testing.T) {
	var a, b Snapshot
	if err := parseStat([]byte(statA), &a); err != nil {
		t.Fatal(err)
	}
	if err := parseSoftirqs([]byte(sirqA), &a); err != nil {
		t.Fatal(err)
	}
	if a.User != 4641 || a.Nice != 10 || a.SoftIRQ != 477 || a.Steal != 13 || a.NetRx != 887407 || a.NetTx != 1401 {
		t.Fatalf("parsed %+v", a)
	}
	if err := parseStat([]byte(statB), &b); err != nil {
		t.Fatal(err)
	}
	if err := parseSoftirqs([]byte(sirqB), &b); err != nil {
		t.Fatal(err)
	}
	a.At = time.Unix(0, 0)
	b.At = a.At.Add(2 * time.Second)
	d := b.Sub(a)
	hz := UserHZ()
	// user+nice grew by 100+10 ticks, system 200, irq 2, softirq 100.
	if d.UserSec != 110/hz || d.SystemSec != 200/hz || d.IRQSec != 2/hz || d.SoftirqSec != 100/hz || d.IdleSec != 110/hz {
		t.Errorf("delta %+v (USER_HZ %g)", d, hz)
	}
	if d.NetRx != 200 || d.NetTx != 99 || d.Wall != 2*time.Second {
		t.Errorf("softirq delta %+v", d)
	}
	if got := a.Sub(b); got.SystemSec != 0 || got.NetRx != 0 {
		t.Errorf("a shrinking counter must give 0, got %+v", got)
	}
	if err := parseStat([]byte("intr 1 2\n"), &a); err == nil {
		t.Error("a file without a cpu line must be an error")
	}
	if err := parseSoftirqs([]byte("HI: 1 2\n"), &a); err == nil {
		t.Error("a file without NET_RX must be an error")
	}
}

// Real counters: loopback traffic must show up as busy CPU time and NET_RX
// softirqs (loopback delivers through the NET_RX softirq).
func TestTakeSeesWork(t *testing.T) {
	if hz := UserHZ(); hz < 10 || hz > 10000 {
		t.Fatalf("USER_HZ %g is not plausible", hz)
	}
	before, err := Take()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 1<<16)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<16)
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	after, err := Take()
	if err != nil {
		t.Fatal(err)
	}
	d := after.Sub(before)
	if d.BusySec() <= 0 || d.NetRx == 0 {
		t.Errorf("300 ms of loopback TCP left busy=%gs net_rx=%d", d.BusySec(), d.NetRx)
	}
}

func TestEmulation(t *testing.T) {
	if EmulationOf("QEMU TCG CPU version 2.5+") == "" {
		t.Error("qemu TCG not seen as emulation")
	}
	for _, m := range []string{"AMD EPYC", "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "QEMU Virtual CPU version 2.5+", ""} {
		if e := EmulationOf(m); e != "" {
			t.Errorf("%q seen as emulation: %s", m, e)
		}
	}
	f, err := os.CreateTemp(t.TempDir(), "cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: QEMU TCG CPU version 2.5+\n")
	old := CPUInfoPath
	CPUInfoPath = f.Name()
	defer func() { CPUInfoPath = old }()
	if Emulation() == "" || Model() != "QEMU TCG CPU version 2.5+" {
		t.Errorf("Model() = %q, Emulation() = %q", Model(), Emulation())
	}
}

// Steadiness runs both loops on the CPU asked for, gives a CV for each
// (finite, non-negative; the arithmetic loop steadier than a few percent
// is not asserted: a busy CI machine may move it), and leaves the calling
// thread's CPU affinity as it found it; a bad window is refused.
func TestMeasureSteadiness(t *testing.T) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	cpuID := -1
	for i := range 1024 {
		if before.IsSet(i) {
			cpuID = i
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s, err := MeasureSteadiness(cpuID, 4, 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU != cpuID || s.Windows != 4 || s.WindowMS != 30 || s.MemoryBytes != chaseBytes || s.SyscallNS <= 0 || s.SyscallNS > 1e6 {
		t.Errorf("steadiness %+v", s)
	}
	for name, v := range map[string]float64{"arithmetic": s.ArithCV, "memory": s.MemoryCV} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || v > 1 {
			t.Errorf("%s CV %v", name, v)
		}
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the thread's CPU affinity was left at %v, was %v", after, before)
	}
	if _, err := MeasureSteadiness(cpuID, 1, time.Millisecond); err == nil {
		t.Error("one window accepted")
	}
}

// The chase's buffer is one cycle through every slot: a chase from any
// slot visits all of them before it comes back.
func TestChaseCycle(t *testing.T) {
	next := chaseCycle(1000)
	p, seen := uint32(0), map[uint32]bool{}
	for range 1000 {
		if seen[p] {
			t.Fatalf("slot %d visited twice after %d steps", p, len(seen))
		}
		seen[p] = true
		p = next[p]
	}
	if p != 0 {
		t.Errorf("after 1000 steps at slot %d, want back at 0", p)
	}
}

package cpu

import (
	"net"
	"os"
	"testing"
	"time"
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

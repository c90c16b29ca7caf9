// Package cpu reads whole-machine CPU time by class from /proc/stat and the
// NET_RX/NET_TX softirq counts from /proc/softirqs, so a sample can say what
// it cost: take a Snapshot before and after, and Sub them.
//
// The counters are machine-wide (all CPUs, all processes): anything else
// running during a sample is charged to it. That is the price of counting
// softirq time, which the kernel does not attribute to any process.
package cpu

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Snapshot is the cumulative counters at one instant (ticks of USER_HZ).
type Snapshot struct {
	At                               time.Time
	User, Nice, System, Idle, IOWait uint64
	IRQ, SoftIRQ, Steal              uint64
	NetRx, NetTx                     uint64 // softirqs raised, summed over CPUs
}

// Delta is what happened between two snapshots, in seconds and counts.
type Delta struct {
	Wall       time.Duration
	UserSec    float64 // user + nice
	SystemSec  float64
	IRQSec     float64
	SoftirqSec float64
	IdleSec    float64 // idle + iowait
	StealSec   float64 // time the hypervisor ran someone else on our vCPUs
	NetRx      uint64
	NetTx      uint64
}

// BusySec is the CPU time spent doing work: user, system, irq and softirq.
func (d Delta) BusySec() float64 { return d.UserSec + d.SystemSec + d.IRQSec + d.SoftirqSec }

// Paths of the files read; tests point them at fixtures.
var (
	StatPath     = "/proc/stat"
	SoftirqsPath = "/proc/softirqs"
)

// userHZ is the unit of /proc/stat: the kernel passes it to every process in
// the auxiliary vector (AT_CLKTCK, what glibc's sysconf(_SC_CLK_TCK) returns).
// It is 100 on every Linux architecture that matters, hence the fallback.
var userHZ = func() float64 {
	const atClkTck = 17 // AT_CLKTCK from <elf.h>
	if av, err := unix.Auxv(); err == nil {
		for _, kv := range av {
			if kv[0] == atClkTck && kv[1] > 0 {
				return float64(kv[1])
			}
		}
	}
	return 100
}()

// UserHZ returns the /proc/stat tick rate in use.
func UserHZ() float64 { return userHZ }

// Take reads both files now.
func Take() (Snapshot, error) {
	s := Snapshot{At: time.Now()}
	stat, err := os.ReadFile(StatPath)
	if err != nil {
		return s, err
	}
	if err := parseStat(stat, &s); err != nil {
		return s, fmt.Errorf("%s: %w", StatPath, err)
	}
	sirq, err := os.ReadFile(SoftirqsPath)
	if err != nil {
		return s, err
	}
	if err := parseSoftirqs(sirq, &s); err != nil {
		return s, fmt.Errorf("%s: %w", SoftirqsPath, err)
	}
	return s, nil
}

// parseStat reads the aggregate "cpu" line:
// cpu user nice system idle iowait irq softirq steal guest guest_nice.
// (guest time is already included in user.)
func parseStat(b []byte, s *Snapshot) error {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return fmt.Errorf("cpu line has %d fields, want at least 8 counters", len(f)-1)
		}
		dst := []*uint64{&s.User, &s.Nice, &s.System, &s.Idle, &s.IOWait, &s.IRQ, &s.SoftIRQ, &s.Steal}
		for i, p := range dst {
			v, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return fmt.Errorf("cpu field %d: %w", i+1, err)
			}
			*p = v
		}
		return nil
	}
	return fmt.Errorf("no aggregate cpu line")
}

// parseSoftirqs sums the NET_RX and NET_TX rows over all CPU columns.
func parseSoftirqs(b []byte, s *Snapshot) error {
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch strings.TrimSpace(name) {
		case "NET_RX":
			dst = &s.NetRx
		case "NET_TX":
			dst = &s.NetTx
		default:
			continue
		}
		var sum uint64
		for _, c := range strings.Fields(rest) {
			v, err := strconv.ParseUint(c, 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %w", strings.TrimSpace(name), err)
			}
			sum += v
		}
		*dst = sum
		found++
	}
	if found != 2 {
		return fmt.Errorf("NET_RX/NET_TX rows not found")
	}
	return nil
}

// Sub returns after - before. Counters only grow; a smaller value (a
// wrapped or reset counter) gives 0 rather than a huge number.
func (after Snapshot) Sub(before Snapshot) Delta {
	sec := func(a, b uint64) float64 {
		if a < b {
			return 0
		}
		return float64(a-b) / userHZ
	}
	cnt := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return Delta{
		Wall:       after.At.Sub(before.At),
		UserSec:    sec(after.User+after.Nice, before.User+before.Nice),
		SystemSec:  sec(after.System, before.System),
		IRQSec:     sec(after.IRQ, before.IRQ),
		SoftirqSec: sec(after.SoftIRQ, before.SoftIRQ),
		IdleSec:    sec(after.Idle+after.IOWait, before.Idle+before.IOWait),
		StealSec:   sec(after.Steal, before.Steal),
		NetRx:      cnt(after.NetRx, before.NetRx),
		NetTx:      cnt(after.NetTx, before.NetTx),
	}
}

// FromTimes is a snapshot holding only user and system time (a cgroup's:
// the kernel keeps no idle, irq or softirq time per cgroup), in ticks of
// USER_HZ rounded to the nearest, so Sub works as on /proc/stat's.
func FromTimes(at time.Time, user, system time.Duration) Snapshot {
	ticks := func(d time.Duration) uint64 { return uint64(d.Seconds()*userHZ + 0.5) }
	return Snapshot{At: at, User: ticks(user), System: ticks(system)}
}

// LoadAvg is /proc/loadavg's first three fields (1, 5 and 15 minutes), as
// the benchmarks note them before and after a run; "unknown" when unreadable.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/results/stats"
)

// Steadiness is how steady one CPU of this machine is apart from any
// network path: two fixed loops, each run in Windows windows of WindowMS
// on CPU, and the CV of their rates across windows. The arithmetic loop
// touches registers only; the pointer chase walks a random cycle through
// MemoryBytes, far beyond a core's caches, as the network stack's work is
// bound by memory more than by arithmetic. On a shared host another
// tenant's cache and memory traffic moves the second more than the first:
// measured here (2 vCPUs, windows of 250-500 ms), arithmetic
// 1.0-4.1% and the chase 4.0-8.1%, while one veth's iperf3 (client and
// server on one CPU) moved 9.8-13.9 Gbit/s from one second to the next of
// one connection. A throughput cell's CV near the
// chase's is the machine's, not its path's.
type Steadiness struct {
	CPU         int     `json:"cpu"`
	Windows     int     `json:"windows"`
	WindowMS    float64 `json:"window_ms"`
	ArithCV     float64 `json:"arithmetic_cv"`
	MemoryCV    float64 `json:"memory_cv"`
	MemoryBytes int     `json:"memory_bytes"`
	// SyscallNS is what one system call (getppid) costs on CPU: the
	// median of five batches. Request/response rates are bound by system
	// calls and wakeups: a host where they cost more reads fewer
	// transactions on every path (here a C request/response loop made 36k
	// tcp_rr/s on a veth with getppid at 310 ns; another host, 181k/s
	// with the same code).
	SyscallNS float64 `json:"syscall_ns"`
}

// chaseBytes is the pointer chase's buffer: 32 MB of 4-byte indices.
const chaseBytes = 32 << 20

// MeasureSteadiness runs both loops on cpu, alternating window by window
// (so a slow spell of the machine falls on both), and restores the calling
// thread's CPU affinity after.
func MeasureSteadiness(cpu, windows int, window time.Duration) (Steadiness, error) {
	if windows < 2 || window <= 0 {
		return Steadiness{}, fmt.Errorf("steadiness: %d windows of %s: want 2 or more of a positive length", windows, window)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return Steadiness{}, fmt.Errorf("steadiness: CPU affinity: %w", err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return Steadiness{}, fmt.Errorf("steadiness: pinning to CPU %d: %w", cpu, err)
	}
	defer func() { _ = unix.SchedSetaffinity(0, &old) }()

	next := chaseCycle(chaseBytes / 4)
	var arith, mem []float64
	x, p := uint64(1), uint32(0)
	for range windows {
		var n int
		n, x = spin(window, x)
		arith = append(arith, float64(n))
		n, p = chase(window, next, p)
		mem = append(mem, float64(n))
	}
	runtime.KeepAlive(x)
	return Steadiness{CPU: cpu, Windows: windows, WindowMS: float64(window) / float64(time.Millisecond),
		ArithCV: stats.CV(arith), MemoryCV: stats.CV(mem), MemoryBytes: chaseBytes, SyscallNS: syscallNS()}, nil
}

// syscallNS is the median cost of getppid over five batches of 100,000.
func syscallNS() float64 {
	const batch = 100000
	var ns []float64
	for range 5 {
		start := time.Now()
		for range batch {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
		ns = append(ns, float64(time.Since(start).Nanoseconds())/batch)
	}
	return stats.Median(ns)
}

// chaseCycle is one random cycle through n slots (Sattolo's shuffle): each
// step of the chase is a load whose address the previous load gave.
func chaseCycle(n int) []uint32 {
	next := make([]uint32, n)
	for i := range next {
		next[i] = uint32(i)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := n - 1; i > 0; i-- {
		j := r.IntN(i)
		next[i], next[j] = next[j], next[i]
	}
	return next
}

// spin runs a register-only loop for d: how many rounds it made.
func spin(d time.Duration, x uint64) (int, uint64) {
	end, n := time.Now().Add(d), 0
	for time.Now().Before(end) {
		for range 10000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		n++
	}
	return n, x
}

// chase walks next for d: how many rounds of 1,000 loads it made.
func chase(d time.Duration, next []uint32, p uint32) (int, uint32) {
	end, n := time.Now().Add(d), 0
	for time.Now().Before(end) {
		for range 1000 {
			p = next[p]
		}
		n++
	}
	return n, p
}

// Package cpupin pins the engines' client and server to CPUs
// (--cpu-affinity), in the spirit of iperf3 -A and netperf -T.
//
// Why: on a machine with few CPUs a request/response test left to the
// scheduler is bimodal. Client, server and the softirqs between them land
// on one CPU in one run and on two in the next (measured on this 2-vCPU
// VM: a C TCP_RR client gave 12k/s in one run and 58k/s in the next on the
// same path); pinned, the rate is stable.
package cpupin

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// The words --cpu-affinity takes besides CPU numbers.
const (
	// Auto pins every test's client and server both on the last CPU
	// vnetlab may use (see Setting.Resolve).
	Auto = "auto"
	// None leaves every engine to the scheduler.
	None = "none"
)

// Default is the flag's and the scenario key's default.
const Default = Auto

// Pins says where one sample's client and server run. The zero value is
// unpinned.
type Pins struct {
	Pinned         bool
	Client, Server int
}

// String is "none", "N" (both on N) or "C,S", the syntax Parse reads.
func (p Pins) String() string {
	switch {
	case !p.Pinned:
		return None
	case p.Client == p.Server:
		return strconv.Itoa(p.Client)
	}
	return fmt.Sprintf("%d,%d", p.Client, p.Server)
}

// Describe says it in words, for tables and reports.
func (p Pins) Describe() string {
	if !p.Pinned {
		return "unpinned"
	}
	return fmt.Sprintf("client CPU %d, server CPU %d", p.Client, p.Server)
}

// Setting is --cpu-affinity as the user gave it: Auto, None, "N" (client
// and server both on CPU N) or "C,S" (client on C, server on S).
type Setting struct {
	word string // Auto or None; "" when pins are given
	pins Pins
}

// Parse reads --cpu-affinity; "" is the Default.
func Parse(s string) (Setting, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "":
		return Setting{word: Default}, nil
	case Auto, None:
		return Setting{word: s}, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return Setting{}, field.Errorf("cpu_affinity", "{cpu_affinity} %q: give one CPU (client and server on it) or two (client,server), e.g. 1 or 0,1; or auto or none", s)
	}
	var cpus []int
	for _, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return Setting{}, field.Errorf("cpu_affinity", "{cpu_affinity} %q: %q is not a CPU number; use e.g. 1 (both on CPU 1), 0,1 (client 0, server 1), auto or none", s, strings.TrimSpace(p))
		}
		cpus = append(cpus, n)
	}
	p := Pins{Pinned: true, Client: cpus[0], Server: cpus[0]}
	if len(cpus) == 2 {
		p.Server = cpus[1]
	}
	return Setting{pins: p}, nil
}

// MustParse is Parse for constants.
func MustParse(s string) Setting {
	st, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return st
}

// String is the setting as Parse reads it back.
func (s Setting) String() string {
	if s.word != "" {
		return s.word
	}
	if s.pins == (Pins{}) { // the zero Setting
		return Default
	}
	return s.pins.String()
}

// IsAuto reports whether the setting is Auto (also the zero Setting).
func (s Setting) IsAuto() bool { return s.String() == Auto }

// Explicit returns the pins a setting names, when it names CPUs.
func (s Setting) Explicit() (Pins, bool) { return s.pins, s.pins.Pinned }

// Resolve says where a sample runs: under Auto, client and server on the
// last CPU in allowed, for every test. Why one CPU for both: the work is
// then serialised on one CPU, the same way in every run, with no cross-CPU
// wake-up whose cost depends on where the scheduler put the other side.
// For request/response tests unpinned rates are bimodal (12k/s in one run,
// 58k/s in the next); for streams on two CPUs, unpinned samples varied
// 8-9% (CV) and one CPU for both 3%, at the same throughput
// (docs/engines.md): a stream then measures what each byte costs the
// path's CPU, which is what differs between paths.
func (s Setting) Resolve(allowed []int) Pins {
	if p, ok := s.Explicit(); ok {
		return p
	}
	if s.String() == None || len(allowed) == 0 {
		return Pins{}
	}
	last := allowed[len(allowed)-1]
	return Pins{Pinned: true, Client: last, Server: last}
}

// Check refuses CPUs outside allowed (the CPUs this process may run on),
// before anything is built.
func (s Setting) Check(allowed []int) error {
	p, ok := s.Explicit()
	if !ok {
		return nil
	}
	for _, c := range []int{p.Client, p.Server} {
		if !slices.Contains(allowed, c) {
			return field.Errorf("cpu_affinity", "{cpu_affinity} %s: CPU %d is not one vnetlab may run on here (%s): pick CPUs from that list, or auto or none", s, c, FormatList(allowed))
		}
	}
	return nil
}

// Allowed lists the CPUs this process may run on (sched_getaffinity: the
// machine's online CPUs, narrowed by any cpuset or taskset it started in).
func Allowed() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	return cpus(&set), nil
}

func cpus(set *unix.CPUSet) []int {
	var out []int
	for c := 0; c < len(set)*64 && len(out) < set.Count(); c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

// FormatList writes ascending numbers (CPUs) as ranges, the way /proc's
// Cpus_allowed_list does ("0-1,4"; converge-report names changes so too).
func FormatList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", cpus[i], cpus[j]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// ParseList reads a Cpus_allowed_list ("0-1,4").
func ParseList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// StartOn runs start (which forks a program: exec.Cmd.Start) on a thread
// pinned to cpu, so that the program inherits the mask before its first
// instruction: unlike sched_setaffinity on its PID afterwards, no thread
// it starts early escapes. The thread's own mask is restored afterwards.
// (The Go runtime never clones a locked thread for its own threads, so no
// vnetlab thread inherits the pin either.)
func StartOn(cpu int, start func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var orig, want unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	want.Set(cpu)
	if err := unix.SchedSetaffinity(0, &want); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	err := start()
	if rerr := unix.SchedSetaffinity(0, &orig); rerr != nil && err == nil {
		err = fmt.Errorf("restore CPU mask: %w", rerr)
	}
	return err
}

// PinSelf pins every thread of this process to cpu (the rr engine's
// --cpu, for where no starter pins it: Kubernetes exec, by hand). A
// thread created while it runs inherits the mask of its creator, so
// passing over the threads until none is left unpinned catches them all.
func PinSelf(cpu int) error {
	var want unix.CPUSet
	want.Set(cpu)
	if err := setAll(&want); err != nil {
		return fmt.Errorf("pin to CPU %d: %w", cpu, err)
	}
	return nil
}

// setAll gives every thread of this process the mask want.
func setAll(want *unix.CPUSet) error {
	for pass := 0; pass < 10; pass++ {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		changed := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			var have unix.CPUSet
			if unix.SchedGetaffinity(tid, &have) == nil && have == *want {
				continue
			}
			if err := unix.SchedSetaffinity(tid, want); err != nil {
				if err == unix.ESRCH { // the thread exited meanwhile
					continue
				}
				return err
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return fmt.Errorf("threads kept appearing")
}

// Set parses a flag's value (pflag.Value).
func (s *Setting) Set(v string) error {
	st, err := Parse(v)
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// Type names the flag's value in help (pflag.Value).
func (s *Setting) Type() string { return "cpus" }

// FewCPUs: on a machine with this many CPUs or fewer an unpinned
// request/response test is likely bimodal (doctor and the report say so).
const FewCPUs = 4

// UnpinnedWarning is what doctor and the report say when request/response
// tests (named in what) run unpinned on a machine with cpus CPUs; "" when
// the machine has more than FewCPUs.
func UnpinnedWarning(what string, cpus int) string {
	if cpus <= 0 || cpus > FewCPUs {
		return ""
	}
	return fmt.Sprintf("%s unpinned on %d CPUs: request/response rates are bimodal with where the scheduler puts client, server and their softirqs (one CPU or two; 12k/s in one run and 58k/s in the next were measured on one path of a 2-CPU machine); pin them with --cpu-affinity auto, N or C,S", what, cpus)
}

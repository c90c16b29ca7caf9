package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPUTime is a cgroup v2 directory's cumulative CPU time (cpu.stat, which
// the kernel keeps in every cgroup v2 directory, with or without the cpu
// controller): what its processes and their descendants' ran, split into
// user and system. Without CONFIG_IRQ_TIME_ACCOUNTING the irq and softirq
// ticks that interrupt one of its processes are counted in its system time.
type CPUTime struct {
	User, System time.Duration
}

// ReadCPUTime reads dir's cpu.stat.
func ReadCPUTime(dir string) (CPUTime, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return CPUTime{}, err
	}
	return parseCPUStat(b)
}

// parseCPUStat reads the user_usec and system_usec lines of cpu.stat.
func parseCPUStat(b []byte) (CPUTime, error) {
	var t CPUTime
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		var dst *time.Duration
		switch {
		case !ok:
			continue
		case k == "user_usec":
			dst = &t.User
		case k == "system_usec":
			dst = &t.System
		default:
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return t, fmt.Errorf("cpu.stat %s: %w", k, err)
		}
		*dst = time.Duration(n) * time.Microsecond
		found++
	}
	if found != 2 {
		return t, fmt.Errorf("cpu.stat has no user_usec/system_usec lines")
	}
	return t, nil
}

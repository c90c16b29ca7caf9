package cpu

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcUsage is one process's CPU time so far (user + system) and resident
// memory now.
type ProcUsage struct {
	CPU time.Duration
	RSS int64 // bytes
}

// OfProcess reads pid's usage from /proc/PID/stat (utime, stime) and
// /proc/PID/status (VmRSS).
func OfProcess(pid int) (ProcUsage, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	// comm may contain spaces: fields start after the last ')' (field 3).
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return ProcUsage{}, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	var ticks float64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return ProcUsage{}, fmt.Errorf("bad /proc/%d/stat: %v", pid, err)
		}
		ticks += float64(v)
	}
	u := ProcUsage{CPU: time.Duration(ticks / userHZ * float64(time.Second))}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return ProcUsage{}, fmt.Errorf("bad VmRSS in /proc/%d/status: %q", pid, v)
			}
			u.RSS = kb * 1024
		}
	}
	return u, nil
}

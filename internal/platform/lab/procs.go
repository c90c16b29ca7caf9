package lab

import (
	"os"
	"strconv"

	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Procs are the PIDs of lab (or local cluster) name's running processes:
// those its journal records, each still the process started then (a
// mode's daemons; a cluster's, and `kube forward`).
func Procs(name string) []int {
	var out []int
	for pidText, startText := range JournalValues(name, KindProc) {
		pid, err1 := strconv.Atoi(pidText)
		start, err2 := strconv.ParseUint(startText, 10, 64)
		if err1 == nil && err2 == nil && proc.Alive(pid, start) {
			out = append(out, pid)
		}
	}
	return out
}

// Measured is what a run in lab name measures, which the machine's other
// work (cpu.OtherWorkOf) leaves out: the lab's processes, and this
// process with what it starts (probers, servers).
func Measured(name string) cpu.Measured {
	return cpu.Measured{Roots: append(Procs(name), os.Getpid())}
}

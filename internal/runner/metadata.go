package runner

import (
	"os"
	"os/exec"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/cpu"
	"github.com/vnetlab/vnetlab/internal/results"
)

// Metadata describes this machine for the results file.
func Metadata(version, commit string, args []string) results.Metadata {
	m := results.Metadata{Vnetlab: version, Commit: commit, CPUs: runtime.NumCPU(), CommandLine: args, Tools: map[string]string{}}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	m.Hostname, _ = os.Hostname()
	m.CPUModel = cpu.Model()
	m.Emulation = cpu.Emulation()
	for _, t := range [][]string{{"iperf3", "--version"}, {"sockperf", "--version"}, {"iptables", "--version"}, {"nft", "--version"}} {
		if out, err := exec.Command(t[0], t[1:]...).CombinedOutput(); err == nil {
			m.Tools[t[0]] = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
		}
	}
	return m
}

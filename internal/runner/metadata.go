package runner

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/results"
)

// Provenance is what made a run: the vnetlab binary (version, commit), its
// command line and the scenario file, if any.
type Provenance struct {
	Version, Commit string
	Args            []string
	Scenario        string
}

// Begin is the results file of a run that starts now: the schema's
// version, and the metadata of this machine, prov and the spec's settings.
// Every run, of labs or clusters, starts its results file here (the one
// place a file's metadata is assembled).
func Begin(prov Provenance, spec Spec) *results.File {
	return &results.File{SchemaVersion: results.SchemaVersion, Metadata: metadata(prov, spec)}
}

// metadata is a run's metadata, as it starts now.
func metadata(prov Provenance, spec Spec) results.Metadata {
	m := results.Metadata{Vnetlab: prov.Version, Commit: prov.Commit, CPUs: runtime.NumCPU(), CommandLine: prov.Args,
		Scenario: prov.Scenario, Tools: map[string]string{}, Settings: spec.settings(), Start: time.Now().UTC()}
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

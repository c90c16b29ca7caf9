package runner

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// A CPU outside this machine's set is refused before anything is built;
// on a cluster (kube run) the nodes' CPUs are not this machine's, and auto
// leaves the engines unpinned there.
func TestCPUAffinitySpec(t *testing.T) {
	allowed, err := cpupin.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	last := allowed[len(allowed)-1]
	spec := DefaultSpec()
	spec.CPUAffinity = cpupin.MustParse("4096")
	err = spec.Validate()
	if err == nil || !strings.Contains(err.Error(), "CPU 4096 is not one vnetlab may run on here") {
		t.Errorf("CPU 4096: %v", err)
	}
	spec.CPUsElsewhere = true
	if err := spec.Validate(); err != nil {
		t.Errorf("CPU 4096 on a cluster: %v (the nodes may have it)", err)
	}

	spec = DefaultSpec()
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := spec.EngineSpec(engine.TCPRR, nil, family.IPv4).CPU; !p.Pinned || p.Client != last || p.Server != last {
		t.Errorf("auto tcp_rr: %+v, want both on CPU %d", p, last)
	}
	if p := spec.EngineSpec(engine.TCPStream, nil, family.IPv4).CPU; !p.Pinned || p.Client != last || p.Server != last {
		t.Errorf("auto tcp_stream: %+v, want both on CPU %d", p, last)
	}
	if got := spec.settings().CPUAffinity; got != "auto" {
		t.Errorf("settings record %q, want auto", got)
	}
	spec.CPUsElsewhere = true
	if p := spec.EngineSpec(engine.TCPCRR, nil, family.IPv4).CPU; p.Pinned {
		t.Errorf("auto tcp_crr on a cluster: %+v, want unpinned", p)
	}
	spec.CPUAffinity = cpupin.MustParse("0,1")
	if p := spec.EngineSpec(engine.UDPStream, nil, family.IPv4).CPU; p != (cpupin.Pins{Pinned: true, Client: 0, Server: 1}) {
		t.Errorf("0,1 on a cluster: %+v", p)
	}
}

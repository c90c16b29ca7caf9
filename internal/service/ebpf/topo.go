package ebpf

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/topo"
)

// The eBPF modes (internal/topo: veth-ebpf, macvlan-ebpf) reach this
// package through topo.EBPF: topo cannot import it (these tests build labs
// through topo), so it registers itself.
func init() { topo.EBPF = topoPlane{} }

type topoPlane struct{}

func (topoPlane) Probe() error { return Probe() }

// Open opens the plane a mode attaches to every pod of a new lab with. It
// uses tc (clsact + cls_bpf): each tcx attach, and each detach, waits for
// an RCU grace period while holding RTNL (kernel/bpf/tcx.c), two per pod
// each way, serialised; measured here, veth-ebpf with 1000 pods took 45 s
// to build and 40 s to remove. cls_bpf waits at most for an expedited one.
func (topoPlane) Open(lab string) (topo.EBPFLab, error) {
	p, err := Open(lab)
	if err != nil {
		return nil, err
	}
	p.Hook = HookTC
	return topoLab{p}, nil
}

type topoLab struct{ *Plane }

func (l topoLab) AttachHostRouting(nodeNS, podNS, podIf string) ([]string, error) {
	ep, err := l.Plane.AttachHostRouting(nodeNS, podNS, podIf)
	return ep.Pins, err
}

func (l topoLab) AttachPodL2(podNS, podIf string) ([]string, error) {
	ep, err := l.Plane.AttachPodL2(podNS, podIf)
	return ep.Pins, err
}

var (
	probeOnce sync.Once
	probeErr  error
)

// Probe loads the programs once, with tiny private maps, to learn whether
// this kernel accepts them (doctor, and modes before a lab is built).
func Probe() error {
	probeOnce.Do(func() {
		spec, err := loadService()
		if err != nil {
			probeErr = err
			return
		}
		for _, m := range spec.Maps {
			m.Pinning = ebpf.PinNone
			if m.Type != ebpf.Array && m.Type != ebpf.PerCPUArray {
				m.MaxEntries = 1
			}
		}
		var objs serviceObjects
		if err := spec.LoadAndAssign(&objs, nil); err != nil {
			probeErr = fmt.Errorf("this kernel does not load vnetlab's eBPF programs: %w", err)
			return
		}
		objs.Close()
	})
	return probeErr
}

package topo

import "errors"

// EBPF is vnetlab's eBPF data plane as the eBPF modes (veth-ebpf,
// macvlan-ebpf) use it. internal/service/ebpf sets it from its init: this
// package cannot import that one, whose tests build labs through here.
// Programs that build labs import it (cmd/vnetlab does).
var EBPF EBPFDataPlane

// EBPFDataPlane opens a lab's data plane (maps pinned in the lab's bpffs
// directory, created on first use).
type EBPFDataPlane interface {
	// Probe says whether this kernel loads the programs (nil: yes).
	Probe() error
	Open(lab string) (EBPFLab, error)
}

// EBPFLab is one lab's open data plane. Attach* return the bpffs paths
// they pinned (to journal); Created the ones Open pinned.
type EBPFLab interface {
	// AttachHostRouting: programs on the node end (in nodeNS) of the veth
	// whose pod end is podIf in podNS, and a route to the pod.
	AttachHostRouting(nodeNS, podNS, podIf string) ([]string, error)
	// AttachPodL2: programs on the pod's own interface and its MAC in the
	// route map (same-segment pods: macvlan).
	AttachPodL2(podNS, podIf string) ([]string, error)
	Created() []string
	Close() error
}

// ebpfUsable is the Usable of the eBPF modes.
func ebpfUsable() error {
	if EBPF == nil {
		return errors.New("this vnetlab build has no eBPF data plane (internal/service/ebpf is not linked in)")
	}
	return EBPF.Probe()
}

// openEBPF opens the lab's data plane and journals what Open pinned.
func openEBPF(env *Env) (EBPFLab, error) {
	if err := ebpfUsable(); err != nil {
		return nil, err
	}
	dp, err := EBPF.Open(env.Lab)
	if err != nil {
		return nil, err
	}
	if err := env.trackPins(dp.Created()); err != nil {
		dp.Close()
		return nil, err
	}
	return dp, nil
}

func (e *Env) trackPins(pins []string) error {
	if e.TrackPin == nil {
		return nil
	}
	for _, p := range pins {
		if err := e.TrackPin(p); err != nil {
			return err
		}
	}
	return nil
}

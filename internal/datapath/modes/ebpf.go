package modes

import "github.com/vnetlab/vnetlab/internal/datapath/tcbpf"

// What the eBPF modes (veth-ebpf, macvlan-ebpf) share: vnetlab's eBPF data
// plane (internal/datapath/tcbpf), which they attach to every pod as they
// build the lab.

// ebpfUsable is the eBPF modes' Usable: the kernel loads the programs.
func ebpfUsable() error { return tcbpf.Probe() }

// openEBPF opens the lab's data plane (maps pinned in the lab's bpffs
// directory, created on first use), attaching with hook, and journals
// what Open pinned.
func openEBPF(env *Env, hook tcbpf.Hook) (*tcbpf.Plane, error) {
	dp, err := tcbpf.OpenFamily(env.Lab, env.Family)
	if err != nil {
		return nil, err
	}
	dp.Hook = hook
	if err := env.trackPins(dp.Created()); err != nil {
		dp.Close()
		return nil, err
	}
	return dp, nil
}

// podsHook is how veth-ebpf and macvlan-ebpf attach to every pod of a new
// lab: tc (clsact + cls_bpf). Each tcx attach, and each detach, waits for
// an RCU grace period while holding RTNL (kernel/bpf/tcx.c), two per pod
// each way, one after the other; measured here, veth-ebpf with 1000 pods
// took 45 s to build and 40 s to remove with tcx. cls_bpf waits at most
// for an expedited grace period.
const podsHook = tcbpf.HookTC

// attachEach attaches the data plane (with hook) to every pod with attach and journals
// the bpffs paths it pinned.
func attachEach(env *Env, hook tcbpf.Hook, attach func(dp *tcbpf.Plane, pod *Pod) (tcbpf.Endpoint, error)) error {
	dp, err := openEBPF(env, hook)
	if err != nil {
		return err
	}
	defer dp.Close()
	for _, pod := range env.Pods {
		ep, err := attach(dp, pod)
		if terr := env.trackPins(ep.Pins); err == nil {
			err = terr
		}
		if err != nil {
			return err
		}
	}
	return nil
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

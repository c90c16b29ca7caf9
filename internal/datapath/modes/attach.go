package modes

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// Attach is the per-pod half of a mode: "attach this pod namespace, with
// this address, to this node". The lab builder calls it for each pod of a
// new lab (Mode.Build defaults to AttachAll) and vnetlab's CNI plugin
// (internal/platform/cni) for each pod kubelet creates: one implementation of the
// mode for both.
type Attach struct {
	// Node readies the node for pods (sysctls, rules, a bridge). The CNI
	// plugin calls it before every pod, so it must be idempotent.
	Node func(env *Env) error
	// Pod wires one pod whose namespace exists (its address is pod.IP, the
	// node end of its link is named pod.HostIfname). i is the pod's index in
	// the lab (names the node end when the pod's name is too long).
	Pod func(env *Env, pod *Pod, i int) error
	// Detach removes everything Pod made for one pod, also after a Pod that
	// failed half-way, and does nothing when there is nothing left: the pod
	// namespace may be gone already (only pod.HostIf and pod.IP are sure).
	Detach func(env *Env, pod *Pod) error
	// Check says what is wrong with a wired pod (nil: nothing).
	Check func(env *Env, pod *Pod) error
}

// AttachAll is Build for a mode that has Attach: the node once, then each
// pod.
func AttachAll(a *Attach) func(env *Env) error {
	return func(env *Env) error {
		defer env.Close()
		if err := a.Node(env); err != nil {
			return err
		}
		for i, pod := range env.Pods {
			if err := a.Pod(env, pod, i); err != nil {
				return err
			}
		}
		return nil
	}
}

// AttachModes lists the modes that attach one pod at a time (the modes the
// CNI plugin can wire), sorted.
func AttachModes() []string {
	return NamesWhere(func(m Mode) bool { return m.Attach != nil })
}

// HostIfname is the name of the node end of the pod's link: pod.HostIf when
// set (the CNI plugin's names), else prefix+pod or prefix+index.
func (p *Pod) HostIfname(prefix string, i int) string {
	if p.HostIf != "" {
		return p.HostIf
	}
	return HostIfname(prefix, p.Pod, i)
}

// Close releases what the modes opened while building (the eBPF data plane).
func (e *Env) Close() {
	if e.plane != nil {
		e.plane.Close()
		e.plane = nil
	}
}

// dataPlane opens the lab's eBPF data plane once per Env (hook: how it
// attaches); Close releases it.
func (e *Env) dataPlane(hook tcbpf.Hook) (*tcbpf.Plane, error) {
	if e.plane != nil {
		return e.plane, nil
	}
	dp, err := openEBPF(e, hook)
	if err != nil {
		return nil, err
	}
	e.plane = dp
	return dp, nil
}

// deleteHostLink removes the node end of a pod's link by name (a veth or
// netkit pair goes with it, and the routes through it); gone already is fine.
func deleteHostLink(env *Env, name string) error {
	l, err := env.Node.H.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("%s in %s: %w", name, env.Node.Name, err)
	}
	if err := env.Node.H.LinkDel(l); err != nil {
		return fmt.Errorf("delete %s in %s: %w", name, env.Node.Name, err)
	}
	return nil
}

// checkPodLink checks the node end hostIf (up, the type want) and the pod's own
// interface (up, holding pod.IP and pod.IP6); it returns the node end.
func checkPodLink(env *Env, pod *Pod, hostIf, want string) (netlink.Link, error) {
	host, err := env.Node.H.LinkByName(hostIf)
	if err != nil {
		return nil, fmt.Errorf("node end %s of %s: %w", hostIf, pod.Pod, err)
	}
	if host.Type() != want {
		return nil, fmt.Errorf("node end %s of %s is a %s, not a %s", hostIf, pod.Pod, host.Type(), want)
	}
	if host.Attrs().Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("node end %s of %s is down", hostIf, pod.Pod)
	}
	l, err := pod.H.LinkByName(pod.Ifname)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", pod.Ifname, pod.Pod, err)
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("%s in %s is down", pod.Ifname, pod.Pod)
	}
	if host.Attrs().Index != l.Attrs().ParentIndex {
		return nil, fmt.Errorf("%s in %s is not the peer of %s", pod.Ifname, pod.Pod, hostIf)
	}
	for _, ip := range []net.IP{pod.IP, pod.IP6} {
		if ip == nil {
			continue
		}
		if ok, err := hasAddr(pod.H, l, ip); err != nil || !ok {
			return nil, fmt.Errorf("%s in %s lacks its address %s", pod.Ifname, pod.Pod, ip)
		}
	}
	return host, nil
}

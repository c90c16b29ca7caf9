package modes

import (
	"errors"
	"fmt"
	"os"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// veth-ebpf: veth-routed's plumbing (seed 002's veth mode, Calico's way)
// plus tc programs on the node end of every pod's veth: Cilium's "BPF host
// routing" (kernel 5.10's bpf_redirect_peer) with vnetlab's Service
// translation folded in (seed 002's veth+eBPF). At the node end's ingress,
// host_from_pod translates a clusterIP to its backend, then hands a packet
// for another pod of this node straight to that pod's eth0 ingress: TTL
// minus one, MACs as the node's router would set them, no routing lookup,
// no netfilter, no backlog queue in the node. Everything else (the node,
// the outside world) still goes through the node's stack. bpf/host.h and
// docs/ebpf.md have the details.
func init() {
	Register(Mode{
		Name:     VethEBPF,
		Seeds:    []Seed{SeedPodModes},
		Summary:  "veth-routed + tc eBPF on the node-side veths: pod-to-pod via bpf_redirect_peer (Cilium's BPF host routing), Services translated in the same program (seed 002 veth+eBPF)",
		Requires: []kernel.Feature{kernel.Veth},
		Usable:   ebpfUsable,
		Build:    buildVethEBPF,
		Attach:   vethEBPF,
		IPv6:     true, // veth-routed's IPv6 wiring; host6.h routes it
		Policies: Policies{PodIf: true, NoNodeFilter: "veth-ebpf redirects pod-to-pod packets from one pod's veth straight into the other pod (bpf_redirect_peer), past the node's netfilter, so node-side policy rules would not see them"},
		Services: Services{Reach: ReachModeDataPlane, EBPF: EBPFHostRouting,
			// Cilium's BPF host routing likewise needs its eBPF kube-proxy replacement.
			NoNetfilter: "veth-ebpf delivers pod-to-pod packets with bpf_redirect_peer, past the node's conntrack, so a backend's replies would never be translated back to the clusterIP: use --provider ebpf (folded into the same programs) or ebpf-sock",
			NodeNote:    "veth-ebpf: pod-to-pod packets are redirected from one pod's veth straight into the other pod (bpf_redirect_peer): the node's iptables/nftables (FORWARD, conntrack, LOG, policy) never see them, as with Cilium's BPF host routing; traffic to the node or the outside world still crosses the node's stack"},
	})
}

// attachHostRouting puts the host-routing programs on the node end of every
// pod's pair (veth, netkit) and routes to the pods in the data plane.
func attachHostRouting(env *Env, hook tcbpf.Hook) error {
	return attachEach(env, hook, func(dp *tcbpf.Plane, pod *Pod) (tcbpf.Endpoint, error) {
		return dp.AttachHostRouting(env.Node.Name, pod.Name, pod.Ifname)
	})
}

// vethEBPF is veth-routed's wiring plus the host-routing programs on each
// pod's node end (a pod added to a running node gets them as it is wired).
var vethEBPF = &Attach{
	Node: func(env *Env) error {
		if err := vethRouted.Node(env); err != nil {
			return err
		}
		_, err := env.dataPlane(podsHook)
		return err
	},
	Pod: func(env *Env, pod *Pod, i int) error {
		if err := vethRouted.Pod(env, pod, i); err != nil {
			return err
		}
		dp, err := env.dataPlane(podsHook)
		if err != nil {
			return err
		}
		ep, err := dp.AttachHostRouting(env.Node.Name, pod.Name, pod.Ifname)
		if terr := env.trackPins(ep.Pins); err == nil {
			err = terr
		}
		return err
	},
	Detach: func(env *Env, pod *Pod) error {
		host := pod.HostIfname("veth-", 0)
		if _, err := os.Stat(tcbpf.PinDir(env.Lab)); err == nil {
			dp, err := env.dataPlane(podsHook)
			if err != nil {
				return err
			}
			// Programs and routes first, while the node end still exists
			// (its index names the routes to drop).
			if eps, err := dp.ListEndpoints(); err == nil {
				for _, ep := range eps {
					if ep.NS == env.Node.Name && ep.Ifname == host {
						if err := dp.DetachEndpoint(ep.NS, ep.Ifname); err != nil {
							return err
						}
					}
				}
			}
			if err := dropStaleRoutes(env, dp); err != nil {
				return err
			}
		}
		return vethRouted.Detach(env, pod)
	},
	Check: func(env *Env, pod *Pod) error {
		if err := vethRouted.Check(env, pod); err != nil {
			return err
		}
		dp, err := env.dataPlane(podsHook)
		if err != nil {
			return err
		}
		host := pod.HostIfname("veth-", 0)
		eps, err := dp.ListEndpoints()
		if err != nil {
			return err
		}
		attached := false
		for _, ep := range eps {
			attached = attached || (ep.NS == env.Node.Name && ep.Ifname == host && ep.Attached)
		}
		if !attached {
			return fmt.Errorf("%s of %s has no host-routing programs", host, pod.Pod)
		}
		routes, err := dp.Routes()
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.IP.String() == pod.IP.String() && r.HostIfindex > 0 {
				return nil
			}
		}
		return fmt.Errorf("no host route to %s in the data plane of %s", pod.IP, env.Lab)
	},
}

// dropStaleRoutes removes host routes through node ends that no longer
// exist (a pod removed while its routes stayed): their index could be
// reused by another pod's veth.
func dropStaleRoutes(env *Env, dp *tcbpf.Plane) error {
	routes, err := dp.Routes()
	if err != nil {
		return err
	}
	for _, r := range routes {
		if r.HostIfindex == 0 {
			continue
		}
		if _, err := env.Node.H.LinkByIndex(r.HostIfindex); err == nil {
			continue
		}
		if err := dp.DelRoute(r.IP); err != nil && !errors.Is(err, tcbpf.ErrNotFound) {
			return err
		}
	}
	return nil
}

func buildVethEBPF(env *Env) error {
	if err := AttachAll(vethEBPF)(env); err != nil {
		return err
	}
	env.Facts = map[string]string{
		"pod_to_pod": "bpf_redirect_peer from the sender's node-side veth into the receiver (node netfilter bypassed)",
		"services":   "ebpf, in the same tc program (vnetlab svc add)",
	}
	return nil
}

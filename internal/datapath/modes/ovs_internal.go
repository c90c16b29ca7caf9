package modes

import (
	"fmt"
	"net"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// ovs-internal: seed 003 (bridge vs Open vSwitch vs KVM, same host and across hosts) "ovs / ns - ns（patch-port）",
// which really uses internal ports:
//
//	ovs-vsctl add-port ovsbr ns1 -- set interface ns1 type=internal
//	ip link set ns1 netns ns1
//
// Each pod's eth0 is an internal port of ovsbr moved into the pod: no veth.
// On the kernel datapath an internal port is an openvswitch netdev. On the
// netdev datapath it is a TAP device whose file descriptor ovs-vswitchd
// holds: moving the device to another namespace keeps that descriptor
// working (frames still flow; measured), while vswitchd's by-name ioctls on
// it fail from then on (its log says "No such device"; harmless here). If
// vswitchd restarted it would recreate the ports in the node, so vnetlab
// never restarts it. These TAPs have no checksum offload unless
// userspace_tso=on, so nothing needs switching off.
func init() {
	Register(Mode{
		Name:      OVSInternal,
		Seeds:     []Seed{SeedBridgeOVS},
		Summary:   "Open vSwitch internal port moved into each pod as eth0, no veth (seed 003 \"patch-port\"); --nodes 2 too; options datapath, userspace_tso, encap",
		Requires:  []kernel.Feature{kernel.Tun},
		Usable:    OVSInstalled,
		Detail:    DatapathDetail,
		Options:   ovsOptions(),
		Build:     buildOVSInternal,
		IPv6:      true,
		CrossHost: true,
	})
}

func buildOVSInternal(env *Env) error {
	if len(env.Nodes) > 1 {
		if err := buildOVSAcrossNodes(env, attachInternalPorts); err != nil {
			return err
		}
		env.Facts["ports"] = internalPortsFact(env.Facts["datapath"], env.Pods[0].Ifname)
		return nil
	}
	sw, c, err := ovsBridge(env)
	if err != nil {
		return err
	}
	if err := attachInternalPorts(env, sw, NthIP(env.PodNet, 1), false); err != nil {
		return err
	}
	env.Facts["offload"] = ovsOffloadFact(c, false)
	env.Facts["ports"] = internalPortsFact(sw.Datapath, env.Pods[0].Ifname)
	return nil
}

// internalPortsFact says how the pods' interfaces are named.
func internalPortsFact(datapath, ifname string) string {
	if datapath == DatapathKernel {
		return "internal ports ovs-<pod> moved into the pods, alternative name " + ifname + " (kernel datapath: renaming would detach them)"
	}
	return "internal ports ovs-<pod> renamed " + ifname + " in the pods"
}

// attachInternalPorts adds an internal port of ovsbr per pod of env and moves
// it into the pod as its eth0, with a default route via gw. Internal ports
// have no offloads to switch off (txOff is unused).
func attachInternalPorts(env *Env, sw *OVSSwitch, gw net.IP, _ bool) error {
	var args, ports []string
	for i, pod := range env.Pods {
		port := HostIfname("ovs-", pod.Pod, i)
		ports = append(ports, port)
		if len(args) > 0 {
			args = append(args, "--")
		}
		args = append(args, "add-port", "ovsbr", port, "--", "set", "interface", port, "type=internal")
	}
	if _, err := sw.Vsctl(args...); err != nil {
		return err
	}
	for i, pod := range env.Pods {
		l, err := waitLink(env.Node.H, ports[i], 5*time.Second)
		if err != nil {
			return err
		}
		if err := moveToPod(env, l, pod, sw.Datapath == DatapathKernel); err != nil {
			return err
		}
		if pod.MTU != 0 {
			in, err := pod.H.LinkByName(pod.Ifname)
			if err != nil {
				return err
			}
			if err := pod.H.LinkSetMTU(in, pod.MTU); err != nil {
				return fmt.Errorf("%s: mtu %d: %w", pod.Pod, pod.MTU, err)
			}
		}
		if err := ovsPodAddrs(env, pod, gw); err != nil {
			return err
		}
	}
	return nil
}

// moveToPod moves a node interface into the pod's namespace, renamed to the
// pod's interface name (ip link set X netns POD; ip -n POD link set X name
// eth0), or with keepName, keeping its name and given the pod's interface
// name as an alternative name (kernel 5.5+), which by-name lookups accept.
// Internal ports of the kernel datapath need keepName: the datapath reports
// its ports under the devices' current names, so after a rename
// ovs-vswitchd, which knows the port by its database name, finds an unknown
// "eth0" (it logs "received packet on unassociated datapath port") and
// recreates the port it lost in the node.
func moveToPod(env *Env, l netlink.Link, pod *Pod, keepName bool) error {
	fd, err := nsutil.FD(pod.Name)
	if err != nil {
		return err
	}
	defer fd.Close()
	name := l.Attrs().Name
	// The kernel's move waits for rcu_barrier() under RTNL
	// (__dev_change_net_namespace): one grace period or more per pod, the
	// bulk of building this mode with many pods.
	if err := env.Node.H.LinkSetNsFd(l, int(fd)); err != nil {
		return fmt.Errorf("move %s into %s: %w", name, pod.Pod, err)
	}
	if !keepName {
		return renameInPod(pod, name)
	}
	in, err := pod.H.LinkByName(name)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", name, pod.Pod, err)
	}
	if err := pod.H.LinkAddAltName(in, pod.Ifname); err != nil {
		return fmt.Errorf("altname %s for %s in %s: %w", pod.Ifname, name, pod.Pod, err)
	}
	return nil
}

// renameInPod renames the pod's link name to the pod's interface name.
func renameInPod(pod *Pod, name string) error {
	in, err := pod.H.LinkByName(name)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", name, pod.Pod, err)
	}
	if err := pod.H.LinkSetName(in, pod.Ifname); err != nil {
		return fmt.Errorf("rename %s to %s in %s: %w", name, pod.Ifname, pod.Pod, err)
	}
	return nil
}

package modes

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// macvlan: seed 002's "macvlan", bridge mode: each
// pod's eth0 is a macvlan child of the node's uplink (the seed's eno2; here
// the node's own eth0, never the machine's). One more child stays in the node
// as a shim holding the gateway 192.168.10.1, and a MASQUERADE rule makes
// replies come back through the node, so clusterIP traffic crosses the
// node's stack. Pod-to-pod traffic never does.
func init() {
	Register(Mode{
		Name:     Macvlan,
		Seeds:    []Seed{SeedLatency, SeedPodModes},
		Summary:  "macvlan bridge-mode children of the node uplink + node shim with gateway and MASQUERADE (seed 002)",
		Requires: []kernel.Feature{kernel.Macvlan},
		Build:    buildMacvlan,
		// As ipvlan: clusterIP traffic reaches the node through the shim.
		Services: Services{Reach: ReachNodeNetfilter, EBPF: EBPFPodIf},
		Policies: Policies{NoNodeFilter: "packets between macvlan pods are switched inside their parent link and never cross the node's netfilter (seed 001: macvlan traffic bypasses the node's iptables), so node-side policy rules would not see them"},
		IPv6:     true,
	})
}

// MacvlanShim is the node-side macvlan holding the gateway.
const MacvlanShim = "mv-shim"

func buildMacvlan(env *Env) error {
	return buildSubInterfaces(env, func(name string, parent int) netlink.Link {
		return &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: parent}, Mode: netlink.MACVLAN_MODE_BRIDGE}
	}, MacvlanShim)
}

// buildSubInterfaces is the shared recipe of macvlan and ipvlan in seed 002:
// children of the uplink in each pod, a shim child in the node with the
// gateway address, and MASQUERADE for pod-to-pod through the node.
func buildSubInterfaces(env *Env, child func(name string, parent int) netlink.Link, shimName string) error {
	up, err := env.Node.H.LinkByName(env.Uplink)
	if err != nil {
		return err
	}
	gw := NthIP(env.PodNet, 1)
	for i, pod := range env.Pods {
		fd, err := nsutil.FD(pod.Name)
		if err != nil {
			return err
		}
		// Created straight into the pod under a name the node does not have,
		// then renamed there: kernels before 6.13 or so check the new name in
		// the node's namespace, where eth0 is the uplink ("file exists").
		tmp := HostIfname("sub-", pod.Pod, i)
		l := child(tmp, up.Attrs().Index)
		l.Attrs().Namespace = netlink.NsFd(int(fd))
		err = env.Node.H.LinkAdd(l)
		fd.Close()
		if err == nil {
			err = renameInPod(pod, tmp)
		}
		if err != nil {
			return fmt.Errorf("%s: %s in %s: %w", l.Type(), pod.Ifname, pod.Pod, err)
		}
		// seed: default via 192.168.10.1 dev eth0 (on-link: same /24)
		if err := PodAddr(pod, env.Prefix(), gw, false); err != nil {
			return err
		}
		if pod.IP6 != nil {
			if err := nodeGatewayPod6(env, pod); err != nil {
				return err
			}
		}
	}
	shim := child(shimName, up.Attrs().Index)
	if err := env.Node.H.LinkAdd(shim); err != nil {
		return fmt.Errorf("shim %s: %w", shimName, err)
	}
	if err := env.Node.H.AddrAdd(shim, &netlink.Addr{IPNet: &net.IPNet{IP: gw, Mask: env.PodNet.Mask}}); err != nil {
		return err
	}
	if err := env.Node.H.LinkSetUp(shim); err != nil {
		return err
	}
	if env.HasIPv6() {
		if err := subInterfaceShim6(env, shim); err != nil {
			return err
		}
	}
	if err := Sysctls(env.Node.Name, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	if err := IptablesRestore(env.Node.Name, podMasqueradeRules(env.PodNet)); err != nil {
		return err
	}
	env.Gateway = gw.String()
	env.Facts = map[string]string{"parent": env.Uplink, "shim": shimName}
	return nil
}

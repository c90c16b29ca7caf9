package modes

import (
	"bytes"
	"context"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// VethToPod creates a veth pair whose peer lands directly in the pod's
// namespace as pod.Ifname; the host end (hostName) stays in the node.
func VethToPod(env *Env, pod *Pod, hostName string) (netlink.Link, error) {
	return pairToPod(env, pod, hostName, func(mtu int, podNS netlink.NsFd) netlink.Link {
		// One queue each way, given explicitly: a veth asked for none gets
		// one per CPU, then trims them to one in use, and each trim waits
		// for an RCU grace period (veth_init_queues), twice per pod.
		return &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostName, MTU: mtu, NumTxQueues: 1, NumRxQueues: 1},
			PeerName: pod.Ifname, PeerNamespace: podNS}
	})
}

// pairToPod adds the device pair pair returns (given the pod's MTU and
// namespace), and returns its node end hostName.
func pairToPod(env *Env, pod *Pod, hostName string, pair func(mtu int, podNS netlink.NsFd) netlink.Link) (netlink.Link, error) {
	podNS, err := nsutil.FD(pod.Name)
	if err != nil {
		return nil, err
	}
	defer podNS.Close()
	mtu := pod.MTU
	if mtu == 0 {
		mtu = 1500
	}
	l := pair(mtu, netlink.NsFd(int(podNS)))
	if err := env.Node.H.LinkAdd(l); err != nil {
		return nil, fmt.Errorf("%s %s <-> %s/%s: %w", l.Type(), hostName, pod.Pod, pod.Ifname, err)
	}
	return env.Node.H.LinkByName(hostName)
}

// PodAddr sets the pod's IPv4 address (with the pod network's prefix), brings
// the interface up and adds a default route via gw; onlink as in seed 002.
// A pod without one (an ipv6 lab) only gets its interface up.
func PodAddr(pod *Pod, prefix int, gw net.IP, onlink bool) error {
	l, err := pod.H.LinkByName(pod.Ifname)
	if err != nil {
		return fmt.Errorf("%s: %w", pod.Pod, err)
	}
	if pod.IP == nil { // an IPv6-only pod (PodAddr6)
		return pod.H.LinkSetUp(l)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: pod.IP, Mask: net.CIDRMask(prefix, 32)}}
	if err := pod.H.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("%s: address %s: %w", pod.Pod, addr.IPNet, err)
	}
	if err := pod.H.LinkSetUp(l); err != nil {
		return err
	}
	if gw == nil {
		return nil
	}
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw}
	if onlink {
		r.Flags = int(netlink.FLAG_ONLINK)
	}
	if err := pod.H.RouteAdd(r); err != nil {
		return fmt.Errorf("%s: default route via %s: %w", pod.Pod, gw, err)
	}
	return nil
}

// IptablesRestore loads rules into a namespace in one transaction, the way
// kube-proxy and dockerd do (iptables-restore --noflush).
func IptablesRestore(ns string, rules string) error { return restore(ns, "iptables-restore", rules) }

// podForwardRules accept the pod network n's traffic in FORWARD, from and
// to it: iptables-restore text for IPv4's n, ip6tables-restore for IPv6's.
func podForwardRules(n *net.IPNet) string {
	return fmt.Sprintf("*filter\n-I FORWARD -s %s -j ACCEPT\n-I FORWARD -d %s -j ACCEPT\nCOMMIT\n", n, n)
}

// podMasqueradeRules masquerade pod-to-pod traffic within n through the
// node (seed: iptables -A POSTROUTING -t nat -s 192.168.10.0/24 -d
// 192.168.10.0/24 -j MASQUERADE); restore text for n's family.
func podMasqueradeRules(n *net.IPNet) string {
	return fmt.Sprintf("*nat\n-A POSTROUTING -s %s -d %s -j MASQUERADE\nCOMMIT\n", n, n)
}

// restore loads rules with prog (iptables-restore or ip6tables-restore).
func restore(ns, prog, rules string) error {
	c := proc.Command(context.Background(), ns, prog, "--noflush")
	c.Stdin = bytes.NewBufferString(rules)
	if _, err := c.Output(); err != nil {
		return fmt.Errorf("%s in %s: %w", prog, ns, err)
	}
	return nil
}

// ensureRule appends a rule to chain of table in namespace ns unless it is
// there already (iptables -C), so that adding pods one by one does not
// repeat it.
func ensureRule(ns, table, chain string, rule ...string) error {
	return ensureRuleWith("iptables", ns, table, chain, rule...)
}

// ensureRuleWith is ensureRule with prog (iptables or ip6tables).
func ensureRuleWith(prog, ns, table, chain string, rule ...string) error {
	check := append([]string{"-t", table, "-C", chain}, rule...)
	if _, err := proc.Command(context.Background(), ns, prog, check...).Output(); err == nil {
		return nil
	}
	add := append([]string{"-t", table, "-I", chain}, rule...)
	if _, err := proc.Command(context.Background(), ns, prog, add...).Output(); err != nil {
		return fmt.Errorf("%s in %s: %w", prog, ns, err)
	}
	return nil
}

// Sysctls sets several sysctls inside one namespace.
func Sysctls(ns string, kv ...string) error {
	return nsutil.Do(ns, func() error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := nsutil.WriteSysctl(kv[i], kv[i+1]); err != nil {
				return err
			}
		}
		return nil
	})
}

// Prefix returns the pod network's prefix length.
func (e *Env) Prefix() int {
	ones, _ := e.PodNet.Mask.Size()
	return ones
}

// NthIP returns the n-th address of a network (1 = first host), IPv4 or IPv6.
func NthIP(n *net.IPNet, i int) net.IP {
	ip := n.IP.To4()
	if ip == nil {
		ip = n.IP.To16()
	}
	out := append(net.IP(nil), ip...)
	carry := uint64(i)
	for b := len(out) - 1; b >= 0 && carry > 0; b-- {
		v := uint64(out[b]) + carry
		out[b], carry = byte(v), v>>8
	}
	return out
}

package lab

// Building a lab: journal then create the namespaces, wire the uplinks,
// then hand the pods to the mode.

import (
	"context"
	"fmt"
	"net"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// nodeName names the node namespace (node1, node2 with --nodes 2).
const nodeName = "node"

func nsName(lab, who string) string { return NSPrefix + lab + "-" + who }

// nsSysctls are set in every namespace of an IPv4 lab as it is created,
// before any interface exists. addr_gen_mode 1 (none): interfaces get no
// IPv6 link-local address, so they send no IPv6 DAD, router solicitation
// or MLD report. At 1000 pods on one bridge those multicasts, each flooded
// to every port, made wiring the pods cost n^2 frames (measured, wiring
// 1000 pods on a bridge: 6.2 s -> 1.9 s). Labs with IPv6 get ipv6Sysctls
// (family.go) instead.
var nsSysctls = []string{"net.ipv6.conf.default.addr_gen_mode", "1"}

// createNS journals, then creates, a marked namespace.
func (l *Lab) createNS(name string) error {
	if err := l.journal.Record(KindNetns, name); err != nil {
		return err
	}
	return nsutil.Create(name, Mark(l.State.Name), sysctlsFor(l.State.Spec.Family)...)
}

// build creates the lab's namespaces and lets the mode wire them; Up
// removes whatever it built if it fails.
func build(ctx context.Context, l *Lab, mode modes.Mode, say Progress) error {
	st := l.State
	spec := st.Spec
	nNodes := spec.NodeCount()
	for i := 0; i < nNodes; i++ {
		name := nodeName
		if nNodes > 1 {
			name = fmt.Sprintf("%s%d", nodeName, i+1)
		}
		st.Nodes = append(st.Nodes, NodeState{Name: name, NS: nsName(spec.Name, name),
			IP: modes.NthIP(underlay, nodeIPOffset+1+i).String(), Uplink: "eth0"})
		if spec.Family.HasIPv6() {
			st.Nodes[i].IP6 = modes.NthIP(uplinkNet6, nodeIPOffset+1+i).String()
		}
	}
	for _, n := range append([]string{st.Ext}, nodeNamespaces(st)...) {
		if err := l.createNS(n); err != nil {
			return err
		}
	}
	_, podNet, _ := net.ParseCIDR(spec.PodCIDR)
	pods := spec.Pods
	if mode.Podless {
		pods = nil
	}
	say("creating %d pod namespaces", len(pods))
	if err := l.createPodNamespaces(ctx, pods); err != nil {
		return err
	}
	for i, p := range pods {
		st.Pods = append(st.Pods, PodState{Name: p.Name, NS: nsName(spec.Name, p.Name), IP: p.IP, IP6: p.IP6, Node: st.Nodes[spec.PodNode(i)].Name, Ifname: "eth0"})
	}
	if err := writeState(st); err != nil {
		return err
	}

	env := &modes.Env{Lab: spec.Name, PodNet: podNet, Options: spec.Options, Uplink: "eth0", ExtIP: modes.NthIP(underlay, extIPIndex),
		StateDir: labDir(spec.Name), Track: l.trackProc, TrackPin: func(p string) error { return l.journal.Record(KindPin, p) },
		Family: spec.Family}
	var parts6 []*net.IPNet
	if spec.Family.HasIPv6() {
		_, env.PodNet6, _ = net.ParseCIDR(spec.PodCIDR6)
		env.ExtIP6 = modes.NthIP(uplinkNet6, extIPIndex)
		parts6 = splitNet(env.PodNet6, nNodes)
	}
	var err error
	if env.Ext, err = openNS(st.Ext); err != nil {
		return err
	}
	defer env.Ext.H.Close()
	parts := splitNet(podNet, nNodes)
	for i, ns := range st.Nodes {
		h, err := openNS(ns.NS)
		if err != nil {
			return err
		}
		defer h.H.Close()
		env.Nodes = append(env.Nodes, &modes.Node{NS: h, Node: ns.Name, IP: net.ParseIP(ns.IP).To4(), PodNet: parts[i]})
		if parts6 != nil {
			env.Nodes[i].IP6, env.Nodes[i].PodNet6 = net.ParseIP(ns.IP6), parts6[i]
		}
	}
	env.Node, env.NodeIP = env.Nodes[0].NS, env.Nodes[0].IP
	if err := wireUplinks(env); err != nil {
		return err
	}
	if nNodes > 1 {
		if err := wireUnderlay(env, spec.UnderlayRate); err != nil {
			return err
		}
	}
	for i, p := range st.Pods {
		ns, err := openNS(p.NS)
		if err != nil {
			return err
		}
		defer ns.H.Close()
		env.Pods = append(env.Pods, &modes.Pod{NS: ns, Pod: p.Name, IP: net.ParseIP(p.IP).To4(), IP6: net.ParseIP(p.IP6), Ifname: p.Ifname, Node: spec.PodNode(i)})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	say("wiring %d pods: mode %s", len(env.Pods), mode.Name)
	if err := mode.Build(env); err != nil {
		return fmt.Errorf("mode %s: %w", mode.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	env.DefaultPaths()
	st.Gateway, st.Paths, st.Facts = env.Gateway, env.Paths, env.Facts
	if spec.Family.HasIPv6() {
		st.Gateway6 = env.Gateway6
	}
	if !spec.Family.HasIPv4() { // the node's own wiring has IPv4; the paths measure IPv6 only
		st.Gateway = ""
		for k, ep := range st.Paths {
			ep.Target = ""
			st.Paths[k] = ep
		}
	}
	return l.applyKnobs(mode)
}

func nodeNamespaces(st *State) []string {
	var out []string
	for _, n := range st.Nodes {
		out = append(out, n.NS)
	}
	return out
}

// splitNet divides n into parts equal subnets (the per-node pod networks),
// IPv4 or IPv6: part i has i in the bits that follow n's prefix.
func splitNet(n *net.IPNet, parts int) []*net.IPNet {
	if parts <= 1 {
		return []*net.IPNet{n}
	}
	ones, bits := n.Mask.Size()
	extra := 0
	for 1<<extra < parts {
		extra++
	}
	base := n.IP.To4()
	if base == nil {
		base = n.IP.To16()
	}
	var out []*net.IPNet
	for i := 0; i < parts; i++ {
		ip := append(net.IP(nil), base...)
		for b := 0; b < extra; b++ {
			if i>>(extra-1-b)&1 == 1 {
				pos := ones + b
				ip[pos/8] |= 0x80 >> (pos % 8)
			}
		}
		out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(ones+extra, bits)})
	}
	return out
}

// createPodNamespaces journals every pod namespace, then creates them
// several at a time: creating one is kernel work that waits in places (RCU
// grace periods), and concurrent waits overlap.
func (l *Lab) createPodNamespaces(ctx context.Context, pods []PodSpec) error {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = nsName(l.State.Name, p.Name)
		// Journal first, sequentially (one writer): clean finds them all.
		if err := l.journal.Record(KindNetns, names[i]); err != nil {
			return err
		}
	}
	mark := Mark(l.State.Name)
	sysctls := sysctlsFor(l.State.Spec.Family)
	return inParallel(ctx, names, func(n string) error { return nsutil.Create(n, mark, sysctls...) })
}

func openNS(name string) (modes.NS, error) {
	h, err := nsutil.Handle(name)
	if err != nil {
		return modes.NS{}, err
	}
	return modes.NS{Name: name, H: h}, nil
}

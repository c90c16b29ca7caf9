// Package cni is vnetlab's CNI plugin (spec 1.0: ADD, DEL, CHECK,
// VERSION; 1.1: STATUS, GC): kubelet's container runtime calls it for every
// pod and it wires the pod with one of vnetlab's own modes (internal/datapath/modes,
// the same code that builds labs), its address from a delegated IPAM
// plugin (host-local). The vnetlab binary is the plugin when it runs under
// the name vnetlab-cni (a link in a CNI bin directory). docs/cni.md.
package cni

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// BinaryName is the name under which the vnetlab binary acts as the plugin
// (the conflist's "type").
const BinaryName = "vnetlab-cni"

// errPluginNotAvailable is CNI 1.1's STATUS code "plugin not available"
// (the library's v1.2 lacks the constant).
const errPluginNotAvailable uint = 50

// hostIfPrefix starts the node end of every pod link the plugin makes.
const hostIfPrefix = "vnl"

// HostIfPrefix is hostIfPrefix for vnetlab's Service proxy, which finds
// the pods' node ends by it (kube-proxy --veth-prefix).
const HostIfPrefix = hostIfPrefix

// Main runs the plugin: the CNI_* environment says what to do, stdin holds
// the configuration, stdout gets the result or a CNI error.
func Main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, Status: cmdStatus, GC: cmdGC},
		version.PluginSupports("0.4.0", "1.0.0", "1.1.0"),
		"vnetlab-cni: pods wired by vnetlab's modes ("+strings.Join(modes.AttachModes(), ", ")+")")
}

// HostIfname is the node end of a pod's link: derived from the container
// and its interface alone, so that a DEL finds what an ADD made (also one
// that failed half-way) without any other record.
func HostIfname(containerID, ifname string) string {
	h := sha256.Sum256([]byte(containerID + "/" + ifname))
	return hostIfPrefix + hex.EncodeToString(h[:])[:11]
}

// noRollback: a failed ADD leaves what it made (tests use it to play an ADD
// killed half-way, which DEL must clean).
var noRollback bool

// attachment is one pod being handled: the mode's view of node and pod.
type attachment struct {
	conf *NetConf
	// ipamConf is the configuration for the IPAM plugin (ipamConfig).
	ipamConf []byte
	mode     modes.Mode
	env      *modes.Env
	pod      *modes.Pod
}

func (a *attachment) close() {
	a.env.Close()
	if a.env.Node.H != nil {
		a.env.Node.H.Close()
	}
	if a.pod.H != nil {
		a.pod.H.Close()
	}
}

// open parses the configuration, takes the node's lock and opens the node
// (and, when needPod, the pod's namespace). The caller closes and unlocks.
func open(args *skel.CmdArgs, needPod bool) (*attachment, func(), error) {
	conf, mode, err := parseConf(args.StdinData)
	if err != nil {
		return nil, nil, err
	}
	unlock, err := lock(conf)
	if err != nil {
		return nil, nil, err
	}
	a := &attachment{conf: conf, mode: mode,
		env: &modes.Env{Lab: conf.Plane, Options: conf.Options, StateDir: conf.StateDir},
		pod: &modes.Pod{Pod: "container " + short(args.ContainerID), Ifname: args.IfName, MTU: conf.MTU, HostIf: HostIfname(args.ContainerID, args.IfName)}}
	a.env.Node.Name, a.pod.Name = conf.NodeNetns, args.Netns
	done := func() { a.close(); unlock() }
	if a.ipamConf, err = ipamConfig(context.Background(), conf, args.StdinData); err != nil {
		done()
		return nil, nil, cniError(types.ErrIncompatibleCNIVersion, "IPAM plugin "+conf.IPAM.Type, err)
	}
	if a.env.Node.H, err = nsutil.Handle(conf.NodeNetns); err != nil {
		done()
		return nil, nil, configError("nodeNetns", "%q: %v", conf.NodeNetns, err)
	}
	if needPod || args.Netns != "" {
		if a.pod.H, err = nsutil.Handle(args.Netns); err != nil && needPod {
			done()
			return nil, nil, types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("vnetlab-cni: pod network namespace %q: %v", args.Netns, err), "")
		}
	}
	return a, done, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// lock serialises the plugin's runs on one node: kubelet adds pods in
// parallel and a mode's node step (a bridge, a rule) must happen once.
func lock(conf *NetConf) (func(), error) {
	if err := os.MkdirAll(conf.StateDir, 0o755); err != nil {
		return nil, configError("stateDir", "%v", err)
	}
	name := strings.NewReplacer("/", "_").Replace(strings.TrimPrefix(conf.NodeNetns, "/")) + ".lock"
	f, err := os.OpenFile(filepath.Join(conf.StateDir, name), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, types.NewError(types.ErrIOFailure, "vnetlab-cni: lock: "+err.Error(), "")
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, types.NewError(types.ErrIOFailure, "vnetlab-cni: lock: "+err.Error(), "")
	}
	return func() { f.Close() }, nil
}

// cniError keeps a CNI error as it is and wraps anything else in code with
// what the plugin was doing.
func cniError(code uint, what string, err error) error {
	var te *types.Error
	if errors.As(err, &te) {
		return te
	}
	return types.NewError(code, "vnetlab-cni: "+what+": "+err.Error(), "")
}

func cmdAdd(args *skel.CmdArgs) error {
	a, done, err := open(args, true)
	if err != nil {
		return err
	}
	defer done()
	if _, err := a.env.Node.H.LinkByName(a.pod.HostIf); err == nil {
		return types.NewError(types.ErrInternal, fmt.Sprintf("vnetlab-cni: %s interface %s is wired already (node end %s): DEL it first", a.pod.Pod, args.IfName, a.pod.HostIf), "")
	}
	ctx := context.Background()
	r, err := invoke.DelegateAdd(ctx, a.conf.IPAM.Type, a.ipamConf, nil)
	if err != nil {
		return cniError(types.ErrInternal, "IPAM plugin "+a.conf.IPAM.Type, err)
	}
	res, err := types100.NewResultFromResult(r)
	if err == nil {
		err = a.takeAddress(res)
	}
	if err == nil {
		if err = a.mode.Attach.Node(a.env); err == nil {
			err = a.mode.Attach.Pod(a.env, a.pod, 0)
		}
		if err != nil {
			err = fmt.Errorf("mode %s: %w", a.mode.Name, err)
		}
	}
	if err == nil {
		err = a.fillResult(res, args.Netns)
	}
	if err != nil {
		if !noRollback {
			// Nothing half-wired stays: the pod's link, its programs and
			// its address go back.
			_ = a.mode.Attach.Detach(a.env, a.pod)
			_ = invoke.DelegateDel(ctx, a.conf.IPAM.Type, a.ipamConf, nil)
		}
		return cniError(types.ErrInternal, "ADD", err)
	}
	res.DNS = a.conf.DNS
	return types.PrintResult(res, a.conf.CNIVersion)
}

// takeAddress sets the pod's addresses and the node's pod networks from
// the IPAM result: its first address of each family (host-local gives one
// per range set: two with a range of each family), and the pod's family.
// A mode without IPv6 wiring refuses an IPv6 address.
func (a *attachment) takeAddress(res *types100.Result) error {
	for _, ip := range res.IPs {
		net4 := &net.IPNet{IP: ip.Address.IP.Mask(ip.Address.Mask), Mask: ip.Address.Mask}
		if v4 := ip.Address.IP.To4(); v4 != nil && a.pod.IP == nil {
			a.pod.IP, a.env.PodNet = v4, &net.IPNet{IP: net4.IP.To4(), Mask: ip.Address.Mask}
		} else if v4 == nil && a.pod.IP6 == nil {
			a.pod.IP6, a.env.PodNet6 = ip.Address.IP, net4
		}
	}
	switch {
	case a.pod.IP == nil && a.pod.IP6 == nil:
		return fmt.Errorf("IPAM plugin %s gave no address", a.conf.IPAM.Type)
	case a.pod.IP == nil:
		return fmt.Errorf("IPAM plugin %s gave an IPv6 address (%s) and no IPv4 one: vnetlab's modes wire IPv4 or dual-stack pods, not IPv6-only ones: add an IPv4 range", a.conf.IPAM.Type, a.pod.IP6)
	case a.pod.IP6 != nil && !a.mode.IPv6:
		return fmt.Errorf("IPAM plugin %s gave an IPv6 address (%s) and mode %s wires IPv4 pods only: drop the IPv6 range, or use a mode with IPv6 (%s)",
			a.conf.IPAM.Type, a.pod.IP6, a.mode.Name, strings.Join(modes.IPv6Modes(), ", "))
	case a.pod.IP6 == nil:
		a.env.Family = family.IPv4
	default:
		a.env.Family = family.Dual
	}
	return nil
}

// fillResult describes what the mode made: the node end, the pod's
// interface, its address of each family with the mode's gateway, a default
// route of each.
func (a *attachment) fillResult(res *types100.Result, netns string) error {
	host, err := a.env.Node.H.LinkByName(a.pod.HostIf)
	if err != nil {
		return err
	}
	l, err := a.pod.H.LinkByName(a.pod.Ifname)
	if err != nil {
		return err
	}
	res.Interfaces = []*types100.Interface{
		{Name: a.pod.HostIf, Mac: host.Attrs().HardwareAddr.String()},
		{Name: a.pod.Ifname, Mac: l.Attrs().HardwareAddr.String(), Sandbox: netns},
	}
	res.IPs, res.Routes = nil, nil
	add := func(ip net.IP, pods *net.IPNet, gateway string, bits int) {
		gw := net.ParseIP(gateway)
		if bits == 32 {
			gw = gw.To4()
		}
		// The prefix the mode gave the pod (veth-routed: a /128 for IPv6).
		mask := pods.Mask
		if addrs, err := a.pod.H.AddrList(l, netlink.FAMILY_ALL); err == nil {
			for _, ad := range addrs {
				if ad.IP.Equal(ip) {
					mask = ad.Mask
				}
			}
		}
		res.IPs = append(res.IPs, &types100.IPConfig{Address: net.IPNet{IP: ip, Mask: mask}, Gateway: gw, Interface: types100.Int(1)})
		res.Routes = append(res.Routes, &types.Route{Dst: net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}, GW: gw})
	}
	if a.pod.IP != nil {
		add(a.pod.IP, a.env.PodNet, a.env.Gateway, 32)
	}
	if a.pod.IP6 != nil {
		add(a.pod.IP6, a.env.PodNet6, a.env.Gateway6, 128)
	}
	return nil
}

func cmdDel(args *skel.CmdArgs) error {
	a, done, err := open(args, false)
	if err != nil {
		return err
	}
	defer done()
	_, err = a.env.Node.H.LinkByName(a.pod.HostIf)
	wired := err == nil
	if err := a.mode.Attach.Detach(a.env, a.pod); err != nil {
		return cniError(types.ErrInternal, "DEL", fmt.Errorf("mode %s: %w", a.mode.Name, err))
	}
	if err := invoke.DelegateDel(context.Background(), a.conf.IPAM.Type, a.ipamConf, nil); err != nil {
		return cniError(types.ErrInternal, "IPAM plugin "+a.conf.IPAM.Type, err)
	}
	if wired {
		a.noteLastDel(args.ContainerID)
	}
	return nil
}

// noteLastDel says in the plugin's log (its stderr, which the runtime
// keeps) what the node's last attachment leaves: the eBPF plane stays for
// the next ADD, and GC removes it once no attachment uses it.
func (a *attachment) noteLastDel(containerID string) {
	if ls, err := a.env.Node.H.LinkList(); err != nil || slices.ContainsFunc(ls, ours) {
		return
	}
	what := "nothing for GC"
	if ents, err := os.ReadDir(tcbpf.PinDir(a.conf.Plane)); err == nil && a.mode.OwnsDataPlane() {
		what = fmt.Sprintf("its eBPF plane %s (%d pins) for CNI GC, which removes it once no attachment uses it", tcbpf.PinDir(a.conf.Plane), len(ents))
	}
	logf("DEL of container %s, the last attachment on node %s (mode %s), leaves %s", short(containerID), a.conf.NodeNetns, a.mode.Name, what)
}

// logf writes one line to the plugin's log: stderr, which CNI reserves for
// it (stdout carries the result).
func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "vnetlab-cni: "+format+"\n", a...)
}

func cmdCheck(args *skel.CmdArgs) error {
	a, done, err := open(args, true)
	if err != nil {
		return err
	}
	defer done()
	if a.conf.PrevResult == nil {
		return configError("prevResult", "missing: CHECK needs the result of the ADD")
	}
	prev, err := types100.NewResultFromResult(a.conf.PrevResult)
	if err != nil {
		return configError("prevResult", "%v", err)
	}
	if err := a.takeAddress(prev); err != nil {
		return configError("prevResult", "%v", err)
	}
	if err := invoke.DelegateCheck(context.Background(), a.conf.IPAM.Type, a.ipamConf, nil); err != nil {
		return cniError(types.ErrInternal, "IPAM plugin "+a.conf.IPAM.Type, err)
	}
	if err := a.mode.Attach.Check(a.env, a.pod); err != nil {
		return cniError(types.ErrInternal, "CHECK", fmt.Errorf("mode %s: %w", a.mode.Name, err))
	}
	return nil
}

// cmdStatus (CNI 1.1): ready when the kernel can build the mode and the
// IPAM plugin is installed.
func cmdStatus(args *skel.CmdArgs) error {
	conf, mode, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	if err := modes.Available(mode); err != nil {
		return types.NewError(errPluginNotAvailable, fmt.Sprintf("vnetlab-cni: mode %s: %v", mode.Name, err), "")
	}
	if _, err := invoke.FindInPath(conf.IPAM.Type, filepath.SplitList(os.Getenv("CNI_PATH"))); err != nil {
		return types.NewError(errPluginNotAvailable, fmt.Sprintf("vnetlab-cni: IPAM plugin %s: %v", conf.IPAM.Type, err), "")
	}
	return nil
}

// cmdGC (CNI 1.1): unwires every pod link of the node that belongs to no
// valid attachment, lets the IPAM plugin collect its addresses, and removes
// the node's eBPF plane once nothing uses it (collectPlane).
func cmdGC(args *skel.CmdArgs) error {
	conf, mode, err := parseConf(args.StdinData)
	if err != nil {
		return err
	}
	unlock, err := lock(conf)
	if err != nil {
		return err
	}
	defer unlock()
	h, err := nsutil.Handle(conf.NodeNetns)
	if err != nil {
		return configError("nodeNetns", "%q: %v", conf.NodeNetns, err)
	}
	env := &modes.Env{Lab: conf.Plane, Options: conf.Options, StateDir: conf.StateDir, Node: modes.NS{Name: conf.NodeNetns, H: h}}
	defer h.Close()
	defer env.Close()
	valid := map[string]bool{}
	for _, v := range conf.ValidAttachments {
		valid[HostIfname(v.ContainerID, v.IfName)] = true
	}
	links, err := h.LinkList()
	if err != nil {
		return cniError(types.ErrInternal, "GC", err)
	}
	for _, l := range links {
		name := l.Attrs().Name
		if ours(l) && !valid[name] {
			if err := mode.Attach.Detach(env, &modes.Pod{Pod: name, HostIf: name}); err != nil {
				return cniError(types.ErrInternal, "GC", err)
			}
		}
	}
	if err := collectPlane(env, conf, mode); err != nil {
		return cniError(types.ErrInternal, "GC", err)
	}
	// Only an IPAM plugin that speaks this version has GC (Debian's
	// host-local stops at 1.0.0: its addresses go with each DEL).
	ctx := context.Background()
	supported, err := ipamVersions(ctx, conf)
	if err != nil {
		return cniError(types.ErrInternal, "IPAM plugin "+conf.IPAM.Type, err)
	}
	if !slices.Contains(supported, conf.CNIVersion) {
		return nil
	}
	if err := invoke.DelegateGC(ctx, conf.IPAM.Type, args.StdinData, nil); err != nil {
		return cniError(types.ErrInternal, "IPAM plugin "+conf.IPAM.Type, err)
	}
	return nil
}

// collectPlane removes the node's eBPF plane (of a mode that makes one)
// when no pod link of the plugin is left on the node and nothing else uses
// the plane (tcbpf's Users: a Service proxy sharing it, as kube up's
// veth-ebpf nodes do, keeps it).
func collectPlane(env *modes.Env, conf *NetConf, mode modes.Mode) error {
	dir := tcbpf.PinDir(conf.Plane)
	if _, err := os.Stat(dir); err != nil || !mode.OwnsDataPlane() {
		return nil
	}
	links, err := env.Node.H.LinkList()
	if err != nil {
		return err
	}
	if slices.ContainsFunc(links, ours) {
		return nil
	}
	dp, err := tcbpf.Open(conf.Plane)
	if err != nil {
		return err
	}
	users, err := dp.Users()
	dp.Close()
	if err != nil {
		return err
	}
	if len(users) > 0 {
		logf("GC: node %s has no attachment left; its eBPF plane %s stays, still used: %s", conf.NodeNetns, dir, strings.Join(users, ", "))
		return nil
	}
	if err := tcbpf.Remove(conf.Plane); err != nil {
		return err
	}
	logf("GC: node %s has no attachment left: removed its eBPF plane %s", conf.NodeNetns, dir)
	return nil
}

// ours: a node end the plugin named (vnl + 11 hex digits).
func ours(l netlink.Link) bool {
	n := l.Attrs().Name
	if len(n) != len(hostIfPrefix)+11 || !strings.HasPrefix(n, hostIfPrefix) {
		return false
	}
	_, err := hex.DecodeString(n[len(hostIfPrefix):] + "0")
	return err == nil
}

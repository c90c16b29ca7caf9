package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/cgroup"
	"github.com/vnetlab/vnetlab/internal/nsutil"
	"github.com/vnetlab/vnetlab/internal/proc"
	"github.com/vnetlab/vnetlab/internal/topo"
)

// Underlay: the link between each node's eth0 and the "external" namespace.
var underlay = mustCIDR("10.10.0.0/24")

const (
	extIPIndex   = 1  // 10.10.0.1: the node's default gateway, in the ext namespace
	nodeIPOffset = 10 // node i gets 10.10.0.(11+i)
	nodeName     = "node"
)

func mustCIDR(s string) *net.IPNet { _, n, _ := net.ParseCIDR(s); return n }

// Lab is a lab this process holds the lock of.
type Lab struct {
	State   *State
	journal *Journal
	lock    *os.File
}

// Release drops the lock (the lab stays up).
func (l *Lab) Release() {
	if l.journal != nil {
		l.journal.Close()
	}
	if l.lock != nil {
		l.lock.Close()
	}
}

// Journal gives access to the lab's journal (to record processes, pins, ...).
func (l *Lab) Journal() *Journal { return l.journal }

// Progress receives one line per step of a long operation.
type Progress func(format string, args ...any)

// Up validates spec and builds the lab. On any failure, or if ctx is
// cancelled, everything already built is removed before returning.
func Up(ctx context.Context, spec Spec, say Progress) (*Lab, error) {
	if say == nil {
		say = func(string, ...any) {}
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if _, pn, _ := net.ParseCIDR(spec.PodCIDR); pn.Contains(underlay.IP) || underlay.Contains(pn.IP) {
		return nil, fmt.Errorf("address clash: pod_cidr %s overlaps vnetlab's node underlay %s: pick another pod_cidr", spec.PodCIDR, underlay)
	}
	mode, _ := topo.Get(spec.Mode)
	l, err := reserve(spec)
	if err != nil {
		return nil, err
	}
	if err := build(ctx, l, mode, say); err != nil {
		l.journal.Close()
		_ = teardown(l.State.Name, say)
		l.lock.Close()
		return nil, err
	}
	l.State.Status = "ready"
	if err := writeState(l.State); err != nil {
		return nil, err
	}
	return l, nil
}

// reserve creates the lab directory (atomic: a taken name fails) and locks it.
func reserve(spec Spec) (*Lab, error) {
	unlock, err := globalLock()
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", StateRoot, err)
	}
	defer unlock()
	dir := labDir(spec.Name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			owner := ""
			if st, lerr := Load(spec.Name); lerr == nil {
				owner = fmt.Sprintf(" (mode %s, created %s)", st.Mode, st.Created.Format(time.RFC3339))
			}
			return nil, fmt.Errorf("lab %q already exists%s: choose another --name or run `vnetlab down %s`", spec.Name, owner, spec.Name)
		}
		return nil, err
	}
	lock, err := lockDir(dir, false)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	j, err := openJournal(spec.Name)
	if err != nil {
		lock.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	st := &State{Name: spec.Name, Mode: spec.Mode, Status: "building", Created: time.Now().UTC(),
		OwnerPID: os.Getpid(), Spec: spec, Ext: nsName(spec.Name, "ext")}
	if err := writeState(st); err != nil {
		lock.Close()
		os.RemoveAll(dir)
		return nil, err
	}
	return &Lab{State: st, journal: j, lock: lock}, nil
}

func nsName(lab, who string) string { return NSPrefix + lab + "-" + who }

// createNS journals, then creates, a marked namespace.
func (l *Lab) createNS(name string) error {
	if err := l.journal.Record(KindNetns, name); err != nil {
		return err
	}
	return nsutil.Create(name, Mark(l.State.Name))
}

func build(ctx context.Context, l *Lab, mode topo.Mode, say Progress) error {
	st := l.State
	spec := st.Spec
	nNodes := spec.NodeCount()
	for i := 0; i < nNodes; i++ {
		name := nodeName
		if nNodes > 1 {
			name = fmt.Sprintf("%s%d", nodeName, i+1)
		}
		st.Nodes = append(st.Nodes, NodeState{Name: name, NS: nsName(spec.Name, name),
			IP: topo.NthIP(underlay, nodeIPOffset+1+i).String(), Uplink: "eth0"})
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
		st.Pods = append(st.Pods, PodState{Name: p.Name, NS: nsName(spec.Name, p.Name), IP: p.IP, Node: st.Nodes[spec.PodNode(i)].Name, Ifname: "eth0"})
	}
	if err := writeState(st); err != nil {
		return err
	}

	env := &topo.Env{Lab: spec.Name, PodNet: podNet, Options: spec.Options, Uplink: "eth0", ExtIP: topo.NthIP(underlay, extIPIndex),
		StateDir: labDir(spec.Name), Track: l.trackProc, TrackPin: func(p string) error { return l.journal.Record(KindPin, p) }}
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
		env.Nodes = append(env.Nodes, &topo.Node{NS: h, Node: ns.Name, IP: net.ParseIP(ns.IP).To4(), PodNet: parts[i]})
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
		env.Pods = append(env.Pods, &topo.Pod{NS: ns, Pod: p.Name, IP: net.ParseIP(p.IP).To4(), Ifname: p.Ifname, Node: spec.PodNode(i)})
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
	return nil
}

func nodeNamespaces(st *State) []string {
	var out []string
	for _, n := range st.Nodes {
		out = append(out, n.NS)
	}
	return out
}

// splitNet divides n into parts equal subnets (the per-node pod networks).
func splitNet(n *net.IPNet, parts int) []*net.IPNet {
	if parts <= 1 {
		return []*net.IPNet{n}
	}
	ones, bits := n.Mask.Size()
	extra := 0
	for 1<<extra < parts {
		extra++
	}
	size := 1 << (bits - ones - extra)
	var out []*net.IPNet
	for i := 0; i < parts; i++ {
		out = append(out, &net.IPNet{IP: topo.NthIP(n, i*size), Mask: net.CIDRMask(ones+extra, bits)})
	}
	return out
}

// createPodNamespaces creates pod namespaces with a few workers: namespace
// creation is mostly kernel work, so two cores are kept busy.
func (l *Lab) createPodNamespaces(ctx context.Context, pods []PodSpec) error {
	// Journal first, sequentially (one writer), then create in parallel.
	for _, p := range pods {
		if err := l.journal.Record(KindNetns, nsName(l.State.Name, p.Name)); err != nil {
			return err
		}
	}
	work := make(chan string)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if err := nsutil.Create(n, Mark(l.State.Name)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range pods {
		if ctx.Err() != nil {
			break
		}
		work <- nsName(l.State.Name, p.Name)
	}
	close(work)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// trackProc journals a daemon a mode started (ovs-vswitchd, the tap switch):
// teardown stops it by PID and start time, also after `up` was killed.
func (l *Lab) trackProc(pid int) error {
	start, err := proc.StartTime(pid)
	if err != nil {
		return fmt.Errorf("process %d exited right after it started: %w", pid, err)
	}
	return l.journal.RecordProc(pid, start)
}

func openNS(name string) (topo.NS, error) {
	h, err := nsutil.Handle(name)
	if err != nil {
		return topo.NS{}, err
	}
	return topo.NS{Name: name, H: h}, nil
}

// wireUplinks joins each node's eth0 to the external namespace, whose bridge
// lan0 holds 10.10.0.1, the nodes' default gateway, like a real host's eth0
// on a LAN (DESIGN.md: without a default route proxy_arp never answers for the
// pods' gateway).
func wireUplinks(env *topo.Env) error {
	extFD, err := nsutil.FD(env.Ext.Name)
	if err != nil {
		return err
	}
	defer extFD.Close()
	prefix := maskOnes(underlay)
	lan := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "lan0"}}
	if err := env.Ext.H.LinkAdd(lan); err != nil {
		return fmt.Errorf("ext bridge: %w", err)
	}
	if err := setAddrUp(env.Ext.H, "lan0", env.ExtIP, prefix); err != nil {
		return err
	}
	for _, n := range env.Nodes {
		peer := n.Node // the ext end is named after the node it leads to
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: env.Uplink, MTU: 1500}, PeerName: peer, PeerNamespace: netlink.NsFd(int(extFD))}
		if err := n.H.LinkAdd(v); err != nil {
			return fmt.Errorf("%s uplink veth: %w", n.Node, err)
		}
		if err := setAddrUp(n.H, env.Uplink, n.IP, prefix); err != nil {
			return err
		}
		pl, err := env.Ext.H.LinkByName(peer)
		if err != nil {
			return err
		}
		if err := env.Ext.H.LinkSetMaster(pl, lan); err != nil {
			return err
		}
		if err := env.Ext.H.LinkSetUp(pl); err != nil {
			return err
		}
		if err := n.H.RouteAdd(&netlink.Route{Gw: env.ExtIP}); err != nil {
			return fmt.Errorf("%s default route: %w", n.Node, err)
		}
		// The ext namespace routes replies for each node's pods back to it.
		if err := env.Ext.H.RouteAdd(&netlink.Route{Dst: n.PodNet, Gw: n.IP}); err != nil {
			return fmt.Errorf("ext route to %s's pods: %w", n.Node, err)
		}
	}
	return nil
}

// Node-to-node underlay (--nodes 2): a veth between node1 and node2 (eth1),
// 10.20.0.1 and 10.20.0.2, optionally shaped with tbf to mimic the seeds' 10GbE.
var underlayNet = mustCIDR("10.20.0.0/24")

const underlayIf = "eth1"

func wireUnderlay(env *topo.Env, rate string) error {
	if len(env.Nodes) != 2 {
		return fmt.Errorf("the underlay joins exactly 2 nodes (got %d)", len(env.Nodes))
	}
	a, b := env.Nodes[0], env.Nodes[1]
	bFD, err := nsutil.FD(b.Name)
	if err != nil {
		return err
	}
	defer bFD.Close()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: underlayIf, MTU: 1500}, PeerName: underlayIf, PeerNamespace: netlink.NsFd(int(bFD))}
	if err := a.H.LinkAdd(v); err != nil {
		return fmt.Errorf("underlay veth: %w", err)
	}
	for i, n := range env.Nodes {
		n.UnderlayIP = topo.NthIP(underlayNet, i+1)
		if err := setAddrUp(n.H, underlayIf, n.UnderlayIP, maskOnes(underlayNet)); err != nil {
			return err
		}
		if rate != "" {
			if err := shape(n.H, underlayIf, rate); err != nil {
				return err
			}
		}
	}
	env.Underlay = underlayIf
	return nil
}

func setAddrUp(h *netlink.Handle, name string, ip net.IP, prefix int) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(prefix, 32)}}); err != nil {
		return fmt.Errorf("address %s on %s: %w", ip, name, err)
	}
	return h.LinkSetUp(l)
}

// Open locks an existing lab for exclusive use (run, svc changes).
func Open(name string) (*Lab, error) {
	st, err := Load(name)
	if err != nil {
		return nil, err
	}
	lock, err := lockDir(labDir(name), false)
	if err != nil {
		return nil, fmt.Errorf("lab %s is in use by another vnetlab process: %v", name, err)
	}
	j, err := openJournal(name)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return &Lab{State: st, journal: j, lock: lock}, nil
}

// Down removes one lab. It waits for nothing: a lab in use is refused.
func Down(name string, say Progress) error {
	if say == nil {
		say = func(string, ...any) {}
	}
	if err := ValidName("lab", name); err != nil {
		return err
	}
	if _, err := os.Stat(labDir(name)); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no lab named %q (see `vnetlab ls`)", name)
	}
	lock, err := lockDir(labDir(name), false)
	if err != nil {
		return fmt.Errorf("lab %s is in use by another vnetlab process (%v): wait for it, or stop it and run `vnetlab clean`", name, err)
	}
	defer lock.Close()
	return teardown(name, say)
}

// teardown stops the lab's processes, removes its pins and namespaces (only
// those carrying its mark), then its state directory.
func teardown(name string, say Progress) error {
	entries := readJournal(name)
	var errs []string
	// 1. processes we started (by PID + start time), newest first.
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].kind != KindProc {
			continue
		}
		f := strings.Fields(entries[i].value)
		if len(f) != 2 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		start, _ := strconv.ParseUint(f[1], 10, 64)
		proc.Stop(pid, start, 2*time.Second)
	}
	// 2. pins
	for _, e := range entries {
		if e.kind == KindPin {
			if err := os.RemoveAll(e.value); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	_ = os.RemoveAll(filepath.Join(BPFRoot, name))
	// 3. cgroups: their processes (vnetlab's clients) stopped, then rmdir;
	// the lab's own path too, in case its journal entry was never written.
	cgs := map[string]bool{}
	if p, err := cgroup.LabPath(name); err == nil {
		cgs[p] = true
	}
	for _, e := range entries {
		if e.kind == KindCgroup {
			cgs[e.value] = true
		}
	}
	for p := range cgs {
		if err := cgroup.Remove(p); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// cgroup trees (a local Kubernetes node's containers).
	for _, e := range entries {
		if e.kind == KindCgroupTree {
			if err := cgroup.RemoveKubeTree(e.value); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	// 4. namespaces, after stopping any process still living inside them.
	seen := map[string]bool{}
	var nss []string
	for _, e := range entries {
		if e.kind == KindNetns && !seen[e.value] {
			seen[e.value] = true
			nss = append(nss, e.value)
		}
	}
	if err := deleteNamespaces(name, nss); err != nil {
		errs = append(errs, err.Error())
	}
	// 5. what daemons mounted under the state directory (container
	// snapshots, pod network namespaces, volumes), then the directory: never
	// removed through a mount that is still there.
	for _, e := range entries {
		if e.kind == KindDir {
			if err := removeDir(e.value); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if err := removeDir(labDir(name)); err != nil {
		errs = append(errs, err.Error())
	}
	// 6. machine-wide sysctls a daemon changed, back to what they were.
	for _, e := range entries {
		if e.kind == KindSysctl {
			if err := restoreSysctl(e.value); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	say("lab %s removed (%d namespaces)", name, len(nss))
	if len(errs) > 0 {
		return fmt.Errorf("lab %s: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

func deleteNamespaces(lab string, nss []string) error {
	var errs []string
	for _, n := range nss {
		if !nsutil.Exists(n) {
			continue
		}
		if !nsutil.IsNamespace(n) {
			// Killed between creating the mount point and mounting it.
			_ = os.Remove(nsutil.Path(n))
			continue
		}
		// Journaled by this lab and marked by it (or killed before the mark was set).
		if got := LabOfMark(nsutil.Mark(n)); got != lab && got != "" {
			// Not ours (or someone reused the name): never touch it.
			errs = append(errs, fmt.Sprintf("namespace %s is not marked as lab %s's; left alone", n, lab))
			continue
		}
		stopProcsIn(n)
		if err := nsutil.Delete(n); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// stopProcsIn stops processes living in a namespace vnetlab created (an
// iperf3 server left by a killed `run`, for instance): each by its PID.
func stopProcsIn(ns string) {
	ino, err := nsutil.Inode(nsutil.Path(ns))
	if err != nil {
		return
	}
	for _, pid := range proc.InNamespace(ino) {
		if start, err := proc.StartTime(pid); err == nil {
			proc.Stop(pid, start, time.Second)
		}
	}
}

// CleanReport says what clean did.
type CleanReport struct {
	Labs       []string `json:"labs_removed"`
	Orphans    []string `json:"orphan_namespaces_removed"`
	Busy       []string `json:"labs_in_use_skipped"`
	PinsPruned []string `json:"pins_removed"`
	Cgroups    []string `json:"orphan_cgroups_removed,omitempty"`
	Errors     []string `json:"errors,omitempty"`
}

// Clean removes every lab no live vnetlab process is using, then any namespace
// marked as vnetlab's whose lab has no state left (a crash between steps).
func Clean(say Progress) (*CleanReport, error) {
	if say == nil {
		say = func(string, ...any) {}
	}
	rep := &CleanReport{}
	unlock, err := globalLock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	ents, _ := os.ReadDir(filepath.Join(StateRoot, "labs"))
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		lock, err := lockDir(labDir(e.Name()), false)
		if errors.Is(err, unix.EWOULDBLOCK) {
			rep.Busy = append(rep.Busy, e.Name())
			say("lab %s is in use by a running vnetlab; skipped", e.Name())
			continue
		}
		if err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			continue
		}
		if err := teardown(e.Name(), say); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
		lock.Close()
		rep.Labs = append(rep.Labs, e.Name())
	}
	live := map[string]bool{}
	for _, b := range rep.Busy {
		live[b] = true
	}
	nsEnts, _ := os.ReadDir(nsutil.Dir)
	for _, e := range nsEnts {
		if !strings.HasPrefix(e.Name(), NSPrefix) {
			continue
		}
		owner := LabOfMark(nsutil.Mark(e.Name()))
		if owner == "" || live[owner] {
			continue
		}
		stopProcsIn(e.Name())
		if err := nsutil.Delete(e.Name()); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
			continue
		}
		rep.Orphans = append(rep.Orphans, e.Name())
	}
	cgs, _ := cgroup.Labs()
	for _, cg := range cgs {
		if live[cg] {
			continue
		}
		if _, err := os.Stat(labDir(cg)); err == nil {
			continue // a lab that is still there (its teardown failed above)
		}
		if path, err := cgroup.LabPath(cg); err == nil {
			if err := cgroup.Remove(path); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			} else {
				rep.Cgroups = append(rep.Cgroups, cg)
			}
		}
	}
	pins, _ := os.ReadDir(BPFRoot)
	for _, p := range pins {
		if live[p.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(BPFRoot, p.Name())); err == nil {
			rep.PinsPruned = append(rep.PinsPruned, p.Name())
		}
	}
	if len(rep.Errors) > 0 {
		return rep, errors.New(strings.Join(rep.Errors, "; "))
	}
	return rep, nil
}

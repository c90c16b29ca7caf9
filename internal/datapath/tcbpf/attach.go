package tcbpf

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/tcx"
)

// Placement says where an endpoint's two programs sit. Both give the same
// translation; see bpf/lb.h for why hairpin works in both.
type Placement string

const (
	// InPod: on the pod's own interface (eth0): from_pod at egress, to_pod
	// at ingress. Seed 002's ipvlan+eBPF; works for macvlan pods too.
	InPod Placement = "pod"
	// NodeSide: on the node end of the pod's veth: from_pod at ingress,
	// to_pod at egress (Cilium's place; the pod's namespace is untouched).
	NodeSide Placement = "node"
	// Routed: NodeSide plus host routing (mode veth-ebpf): host_from_pod at
	// ingress translates, then delivers packets for pods in the lab's route
	// map with bpf_redirect_peer; to_pod at egress. See hostroute.go.
	Routed Placement = "routed"
)

// ParsePlacement reads "pod", "node" or "routed".
func ParsePlacement(s string) (Placement, error) {
	switch Placement(s) {
	case InPod, NodeSide, Routed:
		return Placement(s), nil
	}
	return "", fmt.Errorf("placement %q: want pod (the pod's eth0), node (the node end of its veth) or routed (node end, with host routing)", s)
}

// Hook is how programs are attached.
type Hook string

const (
	// HookTCX: tcx bpf_links (kernel 6.6+), pinned in the lab's directory.
	// The default: the attachment is an object the lab owns (removing the
	// lab's pins detaches it, nothing else can replace it by accident), it
	// needs no qdisc, and other programs (the eBPF fast paths') chain in order.
	HookTCX Hook = "tcx"
	// HookTC: a clsact qdisc and cls_bpf direct-action filters (older
	// kernels). They live as long as the interface does.
	HookTC Hook = "tc"
)

// tc filter identity (HookTC): a priority and names of our own.
const (
	tcPrio   = 0x5656
	tcHandle = 1
)

// Endpoint is an interface carrying the Service programs.
type Endpoint struct {
	NS        string    `json:"netns"` // namespace name under /run/netns, or a path
	Ifname    string    `json:"ifname"`
	Placement Placement `json:"placement"`
	Hook      Hook      `json:"hook"`
	// Pins this endpoint created in bpffs (its directory first).
	Pins []string `json:"pins"`
	// Attached is false when the interface has gone (its namespace deleted).
	Attached bool `json:"attached"`
}

// EndpointsDir holds, under a plane's pin directory, the links of each
// endpoint (pod interface) carrying the programs.
const EndpointsDir = "endpoints"

func (p *Plane) epRoot() string { return filepath.Join(p.dir, EndpointsDir) }

// epDirName encodes one endpoint: escaped ns @ escaped ifname @ placement @ hook.
func epDirName(ns, ifname string, pl Placement, h Hook) string {
	return url.QueryEscape(ns) + "@" + url.QueryEscape(ifname) + "@" + string(pl) + "@" + string(h)
}

func parseEpDir(name string) (Endpoint, bool) {
	f := strings.Split(name, "@")
	if len(f) != 4 {
		return Endpoint{}, false
	}
	ns, err1 := url.QueryUnescape(f[0])
	ifn, err2 := url.QueryUnescape(f[1])
	if err1 != nil || err2 != nil {
		return Endpoint{}, false
	}
	return Endpoint{NS: ns, Ifname: ifn, Placement: Placement(f[2]), Hook: Hook(f[3])}, true
}

// hooks says at which side of the interface each program runs.
func hooks(pl Placement) (fromPod, toPod ebpf.AttachType) {
	if pl == InPod {
		return ebpf.AttachTCXEgress, ebpf.AttachTCXIngress
	}
	return ebpf.AttachTCXIngress, ebpf.AttachTCXEgress
}

// AttachEndpoint puts from_pod and to_pod on interface ifname of namespace
// ns at placement pl. An interface is an endpoint at most once.
func (p *Plane) AttachEndpoint(ns, ifname string, pl Placement) (Endpoint, error) {
	return p.attachEndpoint(ns, ifname, pl, false)
}

// attachEndpoint attaches; l2 picks from_pod_l2 (translated packets
// addressed to a sibling backend's MAC: AttachPodL2, AttachBridgePort).
func (p *Plane) attachEndpoint(ns, ifname string, pl Placement, l2 bool) (Endpoint, error) {
	if _, err := ParsePlacement(string(pl)); err != nil {
		return Endpoint{}, err
	}
	if ep, ok := p.findEndpoint(ns, ifname); ok {
		return Endpoint{}, fmt.Errorf("%s in %s is already a service endpoint (placement %s): remove it first", ifname, ns, ep.Placement)
	}
	var ifindex int
	err := nsutil.Do(ns, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return fmt.Errorf("no interface %s in namespace %s: %w", ifname, ns, err)
		}
		ifindex = l.Attrs().Index
		return nil
	})
	if err != nil {
		return Endpoint{}, err
	}

	hook := p.Hook
	if hook == "" {
		hook = HookTCX
		if !tcxSupported() {
			hook = HookTC
		}
	}
	ep := Endpoint{NS: ns, Ifname: ifname, Placement: pl, Hook: hook, Attached: true}
	dir := filepath.Join(p.epRoot(), epDirName(ns, ifname, pl, hook))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Endpoint{}, fmt.Errorf("endpoint pin directory: %w", err)
	}
	ep.Pins = append(ep.Pins, dir)
	fail := func(err error) (Endpoint, error) {
		_ = p.detach(ep)
		return Endpoint{}, err
	}
	from, to := hooks(pl)
	ps, err := p.programs()
	if err != nil {
		return fail(err)
	}
	fromProg, toProg := ps.FromPod, ps.ToPod
	switch {
	case pl == Routed:
		fromProg, toProg = ps.HostFromPod, ps.HostToPod
	case l2:
		fromProg = ps.FromPodL2
	}
	progs := []struct {
		name string
		prog *ebpf.Program
		at   ebpf.AttachType
	}{{serviceProgFromPod, fromProg, from}, {serviceProgToPod, toProg, to}}
	for _, pr := range progs {
		pin := filepath.Join(dir, pr.name)
		var err error
		if hook == HookTCX {
			err = tcx.Attach(ns, ifindex, pr.prog, pr.at, pin)
		} else {
			err = attachTC(ns, ifindex, pr.name, pr.prog, pr.at, pin)
		}
		if err != nil {
			return fail(fmt.Errorf("attach %s to %s in %s (%s): %w", pr.name, ifname, ns, hook, err))
		}
		ep.Pins = append(ep.Pins, pin)
	}
	return ep, nil
}

// attachTC adds a clsact qdisc (if missing) and a direct-action cls_bpf
// filter, through a netlink handle of the namespace. The program is pinned
// too, as the record ListEndpoints reads.
func attachTC(ns string, ifindex int, name string, prog *ebpf.Program, at ebpf.AttachType, pin string) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}, QdiscType: "clsact"}
	if err := h.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("clsact qdisc: %w", err)
	}
	f := &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: ifindex, Parent: tcParent(at), Handle: tcHandle,
			Protocol: unix.ETH_P_ALL, Priority: tcPrio},
		Fd: prog.FD(), Name: "vnetlab_" + name, DirectAction: true,
	}
	if err := h.FilterAdd(f); err != nil {
		return fmt.Errorf("cls_bpf filter: %w", err)
	}
	// Pin a clone: a Program is pinned at one path at a time, and pinning
	// it again moves the pin, so every endpoint but the last would lose its
	// record.
	c, err := prog.Clone()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Pin(pin)
}

func tcParent(at ebpf.AttachType) uint32 {
	if at == ebpf.AttachTCXIngress {
		return netlink.HANDLE_MIN_INGRESS
	}
	return netlink.HANDLE_MIN_EGRESS
}

func handleAt(ns string) (*netlink.Handle, error) {
	nh, err := netns.GetFromPath(nsutil.Path(ns))
	if err != nil {
		return nil, fmt.Errorf("open namespace %s: %w", ns, err)
	}
	defer nh.Close()
	return netlink.NewHandleAt(nh)
}

var (
	tcxOnce sync.Once
	tcxOK   bool
)

// tcxSupported probes once whether the kernel has tcx.
func tcxSupported() bool {
	tcxOnce.Do(func() {
		// Attaching to ifindex 0 fails either way; an unsupported kernel
		// says so with ErrNotSupported.
		insns := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
		spec := &ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: insns}
		prog, err := ebpf.NewProgram(spec)
		if err != nil {
			return
		}
		defer prog.Close()
		_, err = link.AttachTCX(link.TCXOptions{Interface: 1 << 30, Program: prog, Attach: ebpf.AttachTCXIngress})
		tcxOK = !errors.Is(err, ebpf.ErrNotSupported)
	})
	return tcxOK
}

// DetachEndpoint removes the programs from ifname in ns (placement and hook
// as they were attached).
func (p *Plane) DetachEndpoint(ns, ifname string) error {
	ep, ok := p.findEndpoint(ns, ifname)
	if !ok {
		return fmt.Errorf("%s in %s is not a service endpoint of lab %s", ifname, ns, p.lab)
	}
	return p.detach(ep)
}

func (p *Plane) detach(ep Endpoint) error {
	dir := filepath.Join(p.epRoot(), epDirName(ep.NS, ep.Ifname, ep.Placement, ep.Hook))
	var errs []error
	if err := p.delRoutesOf(ep); err != nil {
		errs = append(errs, err)
	}
	if ep.Hook == HookTC {
		if err := detachTC(ep); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if ep.Hook == HookTCX {
		// Detach explicitly: dropping the pin alone detaches only after
		// bpffs frees the inode (an RCU grace period later).
		for _, name := range []string{serviceProgFromPod, serviceProgToPod} {
			if err := tcx.Detach(filepath.Join(dir, name)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func detachTC(ep Endpoint) error {
	h, err := handleAt(ep.NS)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(ep.Ifname)
	if err != nil {
		return nil // interface gone: nothing left to detach
	}
	for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
		fs, err := h.FilterList(l, parent)
		if err != nil {
			continue
		}
		for _, f := range fs {
			if bf, ok := f.(*netlink.BpfFilter); ok && bf.Priority == tcPrio && strings.HasPrefix(bf.Name, "vnetlab_") {
				if err := h.FilterDel(f); err != nil {
					return fmt.Errorf("delete tc filter on %s: %w", ep.Ifname, err)
				}
			}
		}
	}
	return nil
}

// findEndpoint looks for ifname in ns under each placement and hook: a few
// stats rather than a listing, which would make attaching n pods read n
// endpoints n times.
func (p *Plane) findEndpoint(ns, ifname string) (Endpoint, bool) {
	for _, pl := range []Placement{InPod, NodeSide, Routed} {
		for _, h := range []Hook{HookTCX, HookTC} {
			name := epDirName(ns, ifname, pl, h)
			if _, err := os.Stat(filepath.Join(p.epRoot(), name)); err == nil {
				return p.endpointAt(name)
			}
		}
	}
	return Endpoint{}, false
}

// endpointAt reads the endpoint recorded in directory name of epRoot.
func (p *Plane) endpointAt(name string) (Endpoint, bool) {
	ep, ok := parseEpDir(name)
	if !ok {
		return Endpoint{}, false
	}
	dir := filepath.Join(p.epRoot(), name)
	ep.Pins = []string{dir, filepath.Join(dir, serviceProgFromPod), filepath.Join(dir, serviceProgToPod)}
	ep.Attached = attached(ep)
	return ep, true
}

// ListEndpoints lists the lab's endpoints, read from its pin directory.
func (p *Plane) ListEndpoints() ([]Endpoint, error) {
	names, err := tcx.Dir(p.epRoot())
	if err != nil {
		return nil, err
	}
	var out []Endpoint
	for _, name := range names {
		if ep, ok := p.endpointAt(name); ok {
			out = append(out, ep)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].NS != out[j].NS {
			return out[i].NS < out[j].NS
		}
		return out[i].Ifname < out[j].Ifname
	})
	return out, nil
}

// attached: tcx links report their interface (0 once it is gone); for tc
// the interface must still exist.
func attached(ep Endpoint) bool {
	if ep.Hook == HookTCX {
		return tcx.Linked(ep.Pins[1])
	}
	h, err := handleAt(ep.NS)
	if err != nil {
		return false
	}
	defer h.Close()
	_, err = h.LinkByName(ep.Ifname)
	return err == nil
}

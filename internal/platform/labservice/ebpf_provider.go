package labservice

import (
	"fmt"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// ebpf: vnetlab's own eBPF Service data plane (internal/datapath/tcbpf, design
// in bpf/README.md: tc programs doing DNAT with a BPF conntrack and reverse
// NAT, maps pinned per lab under /sys/fs/bpf/vnetlab/LAB). This file only
// adapts it to the Provider interface: services go into its maps (one hash
// lookup whatever their number), endpoints say where its programs sit.
// Placement follows seed 002: on the node end of each pod's veth (veth+eBPF)
// or, for macvlan/ipvlan pods, on the pod's own interface (ipvlan+eBPF).
type ebpfProvider struct{}

func init() { Register(ebpfProvider{}) }

func (ebpfProvider) Info() Info {
	return Info{Name: EBPF, Endpoints: true, ModePrograms: true, KeepsEmptyServices: true, IPv6: true,
		Summary: "vnetlab's eBPF data plane: tc programs, hash service map (O(1)), BPF conntrack + reverse NAT (seed 002's mustang, open)"}
}

// ebpfPlacement is the endpoint placement of each way the mode says the
// programs attach (seed 002).
var ebpfPlacement = map[modes.EBPFAttach]string{
	modes.EBPFNodeVeth:    PlacementNode,
	modes.EBPFPodIf:       PlacementPod,
	modes.EBPFHostRouting: PlacementRouted,
	modes.EBPFPodL2:       PlacementPod,
}

// adoptModeEndpoints adds to c the endpoints an eBPF mode attached when it
// built the lab, so that the provider's first sync keeps them.
func adoptModeEndpoints(st *lab.State, c *Config) {
	have := map[[2]string]bool{}
	for _, e := range c.Endpoints {
		have[[2]string{e.NS, e.Ifname}] = true
	}
	for _, e := range DefaultEndpoints(st) {
		if !have[[2]string{e.NS, e.Ifname}] {
			c.Endpoints = append(c.Endpoints, e)
		}
	}
}

// ownsPrograms says whether lab st's mode attached vnetlab's eBPF programs
// itself when it built the lab (with host routing, or the backends' MACs):
// the provider then only fills the Service maps, and `ep add/del` attach and
// detach the mode's way.
func ownsPrograms(st *lab.State) bool {
	m, err := st.ModeOf()
	return err == nil && m.OwnsDataPlane()
}

func (ebpfProvider) Supports(m modes.Mode) string {
	if why := podMode(m); why != "" {
		return why
	}
	if m.Services.EBPF == modes.EBPFNotWired {
		return notWired(func(m modes.Mode) bool { return m.Services.EBPF != modes.EBPFNotWired })
	}
	return ""
}

// PlacementFor returns where eBPF programs go in a lab of mode m.
func PlacementFor(m modes.Mode) string {
	if p, ok := ebpfPlacement[m.Services.EBPF]; ok {
		return p
	}
	return PlacementNode
}

// labPlacement is PlacementFor lab st's mode (the node end for a mode this
// vnetlab does not know).
func labPlacement(st *lab.State) string {
	m, _ := st.ModeOf()
	return PlacementFor(m)
}

// DefaultEndpoints attaches programs for every pod of the lab, as a CNI does
// when pods are created (`up --provider ebpf`, `run`).
func DefaultEndpoints(st *lab.State) []Endpoint {
	var out []Endpoint
	for _, p := range st.Pods {
		out = append(out, Endpoint{Pod: p.Name, NS: p.NS, Ifname: p.Ifname, Placement: labPlacement(st)})
	}
	return out
}

func (p ebpfProvider) Install(st *lab.State, c *Config) error { return p.sync(st, c) }

// Update makes the maps and attachments match c; the maps themselves say
// what is loaded, so old is not needed.
func (p ebpfProvider) Update(st *lab.State, _, c *Config) error { return p.sync(st, c) }

func (ebpfProvider) sync(st *lab.State, c *Config) error {
	pl, err := tcbpf.OpenFamily(st.Name, st.Spec.Family)
	if err != nil {
		return err
	}
	defer pl.Close()
	if err := syncServices(pl, c); err != nil {
		return err
	}
	return syncEndpoints(st, pl, c.Endpoints)
}

// syncServices makes the Service maps (shared by the tc programs and the
// socket ones) hold c's services, through the one reconciler Kubernetes'
// proxy uses too (internal/datapath/svcsync): only changed entries are
// touched, and a Service whose backends changed is updated in place, so its
// live flows keep their backends.
func syncServices(pl svcsync.Plane, c *Config) error {
	s, err := svcsync.NewSyncer(pl)
	if err != nil {
		return err
	}
	want := svcsync.Entries{}
	for _, sv := range c.All() {
		es := toEBPF(sv)
		want[svcsync.Key{VIP: es.VIP, Port: es.Port, Proto: es.Proto}] = slices.SortedFunc(slices.Values(es.Backends), tcbpf.CompareBackends)
	}
	// One owner: the lab's services are one set; Prune deletes the entries
	// the set no longer has.
	if _, err := s.Sync(labServices, want); err != nil {
		return err
	}
	_, err = s.Prune()
	return err
}

// labServices owns every entry of a lab's maps (svcsync.Syncer's owner).
const labServices = "lab"

// syncEndpoints attaches the programs for c's endpoints and detaches others.
func syncEndpoints(st *lab.State, pl *tcbpf.Plane, eps []Endpoint) error {
	attached, err := pl.ListEndpoints()
	if err != nil {
		return err
	}
	type where struct{ ns, ifname, placement string }
	have := map[where]bool{}
	for _, a := range attached {
		have[where{a.NS, a.Ifname, string(a.Placement)}] = true
	}
	want := map[where]bool{}
	for _, e := range eps {
		ns, ifname, err := attachPoint(st, e)
		if err != nil {
			return err
		}
		w := where{ns, ifname, e.Placement}
		want[w] = true
		if have[w] {
			continue
		}
		if err := attach(st, pl, e, ns, ifname); err != nil {
			return err
		}
	}
	for _, a := range attached {
		if !want[where{a.NS, a.Ifname, string(a.Placement)}] {
			if err := pl.DetachEndpoint(a.NS, a.Ifname); err != nil {
				return err
			}
		}
	}
	return nil
}

// attach puts a pod's programs in place: plain translation, or the eBPF
// modes' way (host routing for veth-ebpf, the pod's MAC for macvlan-ebpf),
// or on a bridge port with the pod's MAC (bridge, docker-nat).
func attach(st *lab.State, pl *tcbpf.Plane, e Endpoint, ns, ifname string) error {
	var err error
	switch {
	case e.Placement == PlacementRouted:
		_, err = pl.AttachHostRouting(ns, e.NS, e.Ifname)
	case e.Placement == PlacementPod && ebpfAttach(st) == modes.EBPFPodL2:
		_, err = pl.AttachPodL2(e.NS, e.Ifname)
	case e.Placement == PlacementNode && isBridgePort(ns, ifname):
		_, err = pl.AttachBridgePort(ns, e.NS, e.Ifname)
	default:
		_, err = pl.AttachEndpoint(ns, ifname, tcbpf.Placement(e.Placement))
	}
	return err
}

func ebpfAttach(st *lab.State) modes.EBPFAttach {
	m, _ := st.ModeOf()
	return m.Services.EBPF
}

// isBridgePort says whether ifname in ns is enslaved to a Linux bridge
// (modes bridge and docker-nat): translated packets are then switched to
// their backend (tcbpf.AttachBridgePort).
func isBridgePort(ns, ifname string) bool {
	h, err := nsutil.Handle(ns)
	if err != nil {
		return false
	}
	defer h.Close()
	l, err := h.LinkByName(ifname)
	if err != nil || l.Attrs().MasterIndex == 0 {
		return false
	}
	m, err := h.LinkByIndex(l.Attrs().MasterIndex)
	return err == nil && m.Type() == "bridge"
}

// attachPoint is the interface carrying a pod's programs: its own, or the
// node end of its veth (found through the veth's peer index) or netkit.
func attachPoint(st *lab.State, e Endpoint) (ns, ifname string, err error) {
	if e.Placement == PlacementPod {
		return e.NS, e.Ifname, nil
	}
	var peer int
	err = nsutil.Do(e.NS, func() error {
		l, err := netlink.LinkByName(e.Ifname)
		if err != nil {
			return err
		}
		switch v := l.(type) {
		case *netlink.Veth:
			peer, err = netlink.VethPeerIndex(v)
			return err
		case *netlink.Netkit: // its link attribute is the primary's index
			peer = v.Attrs().ParentIndex
			return nil
		}
		return fmt.Errorf("%s is a %s, not a veth: use placement pod", e.Ifname, l.Type())
	})
	if err != nil {
		return "", "", fmt.Errorf("pod %s: node end of %s: %w", e.Pod, e.Ifname, err)
	}
	node := ""
	for _, p := range st.Pods {
		if p.NS == e.NS {
			node = p.Node
		}
	}
	for _, n := range st.Nodes {
		if n.Name == node {
			ns = n.NS
		}
	}
	if ns == "" {
		if ns, err = nodeNS(st); err != nil {
			return "", "", err
		}
	}
	h, err := nsutil.Handle(ns)
	if err != nil {
		return "", "", err
	}
	defer h.Close()
	l, err := h.LinkByIndex(peer)
	if err != nil {
		return "", "", fmt.Errorf("pod %s: node end of %s (index %d) in %s: %w", e.Pod, e.Ifname, peer, ns, err)
	}
	return ns, l.Attrs().Name, nil
}

func (ebpfProvider) Remove(st *lab.State, _ *Config) error {
	pl, err := tcbpf.OpenFamily(st.Name, st.Spec.Family)
	if err != nil {
		return err
	}
	defer pl.Close()
	// The eBPF modes' programs are the mode's: back to what it built.
	var keep []Endpoint
	if ownsPrograms(st) {
		keep = DefaultEndpoints(st)
	}
	if err := syncEndpoints(st, pl, keep); err != nil {
		return err
	}
	return syncServices(pl, &Config{})
}

func toEBPF(s Service) tcbpf.Service {
	proto, _ := tcbpf.ParseProto(s.Proto)
	es := tcbpf.Service{VIP: s.VIP, Port: s.Port, Proto: proto}
	for _, b := range s.Backends {
		es.Backends = append(es.Backends, tcbpf.Backend{IP: b.IP, Port: b.Port})
	}
	return es
}

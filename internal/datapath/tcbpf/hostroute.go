package tcbpf

// Host routing (bpf/host.h, bpf/host6.h): the lab's pod_routes map (IPv4)
// and pod_routes6 (IPv6) say how each pod is reached without the node's
// stack. Modes veth-ebpf and macvlan-ebpf fill
// it when they build a lab, the ebpf provider on bridge modes when it
// attaches; `vnetlab ep add` calls the same functions for a pod added later.

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// PodRoute is one pod the programs deliver to directly.
type PodRoute struct {
	IP  netip.Addr       `json:"ip"`
	MAC net.HardwareAddr `json:"mac"` // the pod's interface
	// HostIfindex is the node end of the pod's veth in the node's namespace
	// (the bpf_redirect_peer target) and HostMAC its address; 0 for a pod
	// on the same L2 segment as its peers (macvlan, bridge), reached by MAC
	// alone. On a bridge, HostMAC is still the pod's port (so that
	// detaching the port finds the route).
	HostIfindex int              `json:"host_ifindex,omitempty"`
	HostMAC     net.HardwareAddr `json:"host_mac,omitempty"`
}

// Validate checks what the programs need.
func (r PodRoute) Validate() error {
	if !routable(r.IP) {
		return fmt.Errorf("pod route %s: the pod address must be a unicast IPv4 or IPv6 address, not link-local or v4-mapped", r.IP)
	}
	if len(r.MAC) != 6 {
		return fmt.Errorf("pod route %s: MAC %q is not an Ethernet address", r.IP, r.MAC)
	}
	if r.HostIfindex < 0 || (r.HostIfindex > 0 && len(r.HostMAC) != 6) {
		return fmt.Errorf("pod route %s: node-side interface %d needs its Ethernet address", r.IP, r.HostIfindex)
	}
	return nil
}

// AddRoute adds or replaces the route to one pod.
func (p *Plane) AddRoute(r PodRoute) error {
	if err := r.Validate(); err != nil {
		return err
	}
	v := servicePodRoute{Ifindex: uint32(r.HostIfindex)}
	copy(v.Mac[:], r.MAC)
	copy(v.NodeMac[:], r.HostMAC)
	m, k := p.routeKey(r.IP)
	if err := m.Update(k, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("pod route %s: %w", r.IP, err)
	}
	return nil
}

// routable: an address host routing may deliver to. A link-local or
// multicast destination is never forwarded; a v4-mapped one is IPv4's.
func routable(ip netip.Addr) bool {
	return ip.IsValid() && !ip.Is4In6() && !ip.IsLinkLocalUnicast() && !ip.IsMulticast() && !ip.IsUnspecified() && ip.Zone() == ""
}

// routeKey is ip's route map (pod_routes or pod_routes6) and its key there.
func (p *Plane) routeKey(ip netip.Addr) (*ebpf.Map, any) {
	if ip.Is4() {
		k := be32(ip)
		return p.objs.PodRoutes, &k
	}
	k := addr6Words(ip)
	return p.objs.PodRoutes6, &k
}

// DelRoute removes the route to a pod (ErrNotFound if there is none).
func (p *Plane) DelRoute(ip netip.Addr) error {
	if !routable(ip) {
		return fmt.Errorf("pod route %s: not a pod address", ip)
	}
	m, k := p.routeKey(ip)
	if err := m.Delete(k); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("pod route %s: %w", ip, ErrNotFound)
		}
		return err
	}
	return nil
}

// Routes lists the pod routes of both families, sorted by address.
func (p *Plane) Routes() ([]PodRoute, error) {
	var (
		k   uint32
		k6  addr6Raw
		v   servicePodRoute
		out []PodRoute
	)
	route := func(ip netip.Addr) PodRoute {
		r := PodRoute{IP: ip, MAC: append(net.HardwareAddr(nil), v.Mac[:]...), HostIfindex: int(v.Ifindex)}
		if v.Ifindex != 0 {
			r.HostMAC = append(net.HardwareAddr(nil), v.NodeMac[:]...)
		}
		return r
	}
	it := p.objs.PodRoutes.Iterate()
	for it.Next(&k, &v) {
		out = append(out, route(addrOf(k)))
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	it = p.objs.PodRoutes6.Iterate()
	for it.Next(&k6, &v) {
		out = append(out, route(addrOf6(k6)))
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP.Less(out[j].IP) })
	return out, nil
}

// podLink is what host routing needs to know about a pod's interface.
type podLink struct {
	index, peerIndex int
	mac              net.HardwareAddr
	addrs            []netip.Addr
}

func readPodLink(podNS, podIf string) (podLink, error) {
	var pl podLink
	err := nsutil.Do(podNS, func() error {
		l, err := netlink.LinkByName(podIf)
		if err != nil {
			return fmt.Errorf("no interface %s in namespace %s: %w", podIf, podNS, err)
		}
		pl.index, pl.peerIndex, pl.mac = l.Attrs().Index, l.Attrs().ParentIndex, l.Attrs().HardwareAddr
		as, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range as {
			if ip, ok := netip.AddrFromSlice(a.IP); ok && routable(ip.Unmap()) {
				pl.addrs = append(pl.addrs, ip.Unmap())
			}
		}
		return nil
	})
	if err == nil && len(pl.addrs) == 0 {
		err = fmt.Errorf("%s in %s has no IPv4 or global IPv6 address: give the pod its address first", podIf, podNS)
	}
	return pl, err
}

// AttachHostRouting makes a veth pod reachable by host routing (mode
// veth-ebpf): podIf in podNS is the pod's end of a veth whose other end is
// in nodeNS. That node end gets host_from_pod (ingress) and to_pod
// (egress), and each address of the pod (IPv4, global IPv6) a route to it.
func (p *Plane) AttachHostRouting(nodeNS, podNS, podIf string) (Endpoint, error) {
	pod, host, err := nodeEnd(nodeNS, podNS, podIf, "host routing needs one (mode veth-ebpf)")
	if err != nil {
		return Endpoint{}, err
	}
	ep, err := p.AttachEndpoint(nodeNS, host.Attrs().Name, Routed)
	if err != nil {
		return Endpoint{}, err
	}
	for _, ip := range pod.addrs {
		r := PodRoute{IP: ip, MAC: pod.mac, HostIfindex: host.Attrs().Index, HostMAC: host.Attrs().HardwareAddr}
		if err := p.AddRoute(r); err != nil {
			_ = p.detach(ep)
			return Endpoint{}, err
		}
	}
	return ep, nil
}

// nodeEnd reads a pod's interface and the node end of its veth (why says
// what needs a veth, for the error).
func nodeEnd(nodeNS, podNS, podIf, why string) (podLink, netlink.Link, error) {
	pod, err := readPodLink(podNS, podIf)
	if err != nil {
		return pod, nil, err
	}
	var host netlink.Link
	err = nsutil.Do(nodeNS, func() error {
		var err error
		host, err = netlink.LinkByIndex(pod.peerIndex)
		// A netkit pair (L2 mode) is wired like a veth: its primary's tc
		// ingress sees what the pod sends, bpf_redirect_peer reaches the pod.
		if err != nil || (host.Type() != "veth" && host.Type() != "netkit") || host.Attrs().ParentIndex != pod.index {
			return fmt.Errorf("%s in %s is not a veth (or netkit) whose other end is in %s: %s", podIf, podNS, nodeNS, why)
		}
		return nil
	})
	return pod, host, err
}

// AttachBridgePort puts the Service programs on the node end of a pod's
// veth that is a bridge port (modes bridge, docker-nat) and the pod's
// addresses and MAC in the route map, marked with the port's MAC: a packet
// translated for a backend on the same bridge is addressed to the backend's
// MAC and switched to it, as a packet sent to the pod's IP is, instead of
// being routed by the node (and crossing br_netfilter twice).
func (p *Plane) AttachBridgePort(nodeNS, podNS, podIf string) (Endpoint, error) {
	pod, host, err := nodeEnd(nodeNS, podNS, podIf, "the bridge placement needs one")
	if err != nil {
		return Endpoint{}, err
	}
	if host.Attrs().MasterIndex == 0 {
		return Endpoint{}, fmt.Errorf("%s in %s is not a bridge port: use placement node", host.Attrs().Name, nodeNS)
	}
	ep, err := p.attachEndpoint(nodeNS, host.Attrs().Name, NodeSide, true)
	if err != nil {
		return Endpoint{}, err
	}
	for _, ip := range pod.addrs {
		if err := p.AddRoute(PodRoute{IP: ip, MAC: pod.mac, HostMAC: host.Attrs().HardwareAddr}); err != nil {
			_ = p.detach(ep)
			return Endpoint{}, err
		}
	}
	return ep, nil
}

// AttachPodL2 puts the Service programs on a pod's own interface (podIf in
// podNS, e.g. a macvlan child: mode macvlan-ebpf) and its addresses and MAC
// in the route map, so that a sibling's translated packets are addressed
// to it directly rather than to the node's gateway.
func (p *Plane) AttachPodL2(podNS, podIf string) (Endpoint, error) {
	pod, err := readPodLink(podNS, podIf)
	if err != nil {
		return Endpoint{}, err
	}
	ep, err := p.attachEndpoint(podNS, podIf, InPod, true)
	if err != nil {
		return Endpoint{}, err
	}
	for _, ip := range pod.addrs {
		if err := p.AddRoute(PodRoute{IP: ip, MAC: pod.mac}); err != nil {
			_ = p.detach(ep)
			return Endpoint{}, err
		}
	}
	return ep, nil
}

// delRoutesOf removes the routes that lead to an endpoint being detached:
// a stale route would redirect to an interface index that may be reused.
func (p *Plane) delRoutesOf(ep Endpoint) error {
	if ep.Placement != Routed && ep.Placement != InPod && ep.Placement != NodeSide {
		return nil
	}
	var link netlink.Link
	err := nsutil.Do(ep.NS, func() error {
		var err error
		link, err = netlink.LinkByName(ep.Ifname)
		return err
	})
	if err != nil {
		return nil // interface or namespace gone: its lab is being torn down
	}
	routes, err := p.Routes()
	if err != nil {
		return err
	}
	for _, r := range routes {
		mine := ep.Placement == Routed && r.HostIfindex == link.Attrs().Index
		mine = mine || (ep.Placement == InPod && r.HostIfindex == 0 && bytes.Equal(r.MAC, link.Attrs().HardwareAddr))
		mine = mine || (ep.Placement == NodeSide && r.HostIfindex == 0 && bytes.Equal(r.HostMAC, link.Attrs().HardwareAddr))
		if mine {
			if err := p.DelRoute(r.IP); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
	}
	return nil
}

// HostStats are host routing's counters, summed over CPUs.
type HostStats struct {
	Redirected uint64 `json:"redirected"`  // delivered with bpf_redirect_peer
	Stack      uint64 `json:"to_stack"`    // not a local pod: left to the node's stack
	TTLExpired uint64 `json:"ttl_expired"` // TTL 1 or 0: left to the stack
	L2         uint64 `json:"l2_rewrites"` // translated packets addressed to a sibling pod's MAC
}

// HostStats reads the counters.
func (p *Plane) HostStats() (HostStats, error) { return hostStatsOf(p.objs.HostStats) }

// hostStatsOf reads host_stats.
func hostStatsOf(m *ebpf.Map) (HostStats, error) {
	v, err := SumCounters(m, "host stats", 4)
	if err != nil {
		return HostStats{}, err
	}
	return HostStats{Redirected: v[0], Stack: v[1], TTLExpired: v[2], L2: v[3]}, nil
}

// ResetViaStack clears lab's host_via_stack_on, the sticky flag host
// routing sets once a flow crossed the node's stack (a Service kube-proxy
// translated: bpf/host.h): a plane whose proxy became vnetlab's again
// takes the fast path without the flag's lookup. The flows it noted
// (host_via_stack, host_via_stack6) are ClearFlows'. From the pin (not
// pinned: nothing to do).
func ResetViaStack(lab string) error {
	path := filepath.Join(PinDir(lab), serviceMapHostViaStackOn)
	m, err := ebpf.LoadPinnedMap(path, nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer m.Close()
	if err := m.Update(uint32(0), uint32(0), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// ViaStackOn reads lab's host_via_stack_on (false when it is not pinned).
func ViaStackOn(lab string) (bool, error) {
	if !HasPin(lab, serviceMapHostViaStackOn) {
		return false, nil
	}
	var on uint32
	err := ReadPinned(lab, serviceMapHostViaStackOn, func(m *ebpf.Map) error { return m.Lookup(uint32(0), &on) })
	return on != 0, err
}

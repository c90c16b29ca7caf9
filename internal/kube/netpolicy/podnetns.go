package netpolicy

import (
	"net"
	"net/netip"
	"path/filepath"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/polbpf"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// PodNetnsGlob finds, under a node's containerd state directory, the pods'
// network namespaces (kube up's containerd mounts them under its state:
// netns_mounts_under_state_dir, in the CRI plugin's directory).
const PodNetnsGlob = "*/netns/*"

// podIfs finds the node's pods' interfaces by their addresses: the
// namespaces the node's containerd mounted, each read once it has an
// address (a pod's namespace keeps its addresses for its life; a new
// sandbox is a new mount). The CNI keeps no record of a pod's namespace
// that the controller could read, and the API has none: the address the
// API gives the pod is what ties the two.
type podIfs struct {
	glob  string
	known map[string][]podIf // by namespace path
}

type podIf struct {
	addr netip.Addr
	i    polbpf.Interface
}

func newPodIfs(containerdState string) *podIfs {
	return &podIfs{glob: filepath.Join(containerdState, PodNetnsGlob), known: map[string][]podIf{}}
}

// byAddr reads the namespaces mounted now and returns the interface of
// each pod address found (loopback aside). A namespace gone is forgotten.
func (f *podIfs) byAddr() map[netip.Addr]polbpf.Interface {
	paths, _ := filepath.Glob(f.glob)
	now := map[string]bool{}
	for _, p := range paths {
		now[p] = true
		if _, ok := f.known[p]; !ok {
			if ifs := readPodIfs(p); len(ifs) > 0 {
				f.known[p] = ifs
			}
		}
	}
	out := map[netip.Addr]polbpf.Interface{}
	for p, ifs := range f.known {
		if !now[p] {
			delete(f.known, p)
			continue
		}
		for _, pi := range ifs {
			out[pi.addr] = pi.i
		}
	}
	return out
}

// readPodIfs lists the global addresses of namespace path with their
// interfaces (none: not wired yet, or not readable).
func readPodIfs(path string) []podIf {
	h, err := nsutil.Handle(path)
	if err != nil {
		return nil
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil
	}
	var out []podIf
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok || !ip.Unmap().IsGlobalUnicast() {
				continue
			}
			out = append(out, podIf{addr: ip.Unmap(), i: polbpf.Interface{NS: path, Ifname: l.Attrs().Name}})
		}
	}
	return out
}

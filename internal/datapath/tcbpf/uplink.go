package tcbpf

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/tcx"
)

// A node's uplink (its eth0) carries the NodePort programs of
// bpf/nodeport.h (nodeport6.h over IPv6): nodeport_in at ingress (DNAT nodeIP:nodePort -> backend,
// SNAT to the node IP when the backend is on another node, and the reverse
// of that SNAT), nodeport_out at egress (replies of local backends). A
// NodePort itself is an ordinary Service entry whose address is the node's
// IP (AddService with VIP = node IP).

func (p *Plane) uplinkDir(ns, ifname string, h Hook) string {
	return filepath.Join(p.dir, UplinksDir, epDirName(ns, ifname, "uplink", h))
}

// UplinksDir holds, under a plane's pin directory, the NodePort programs'
// links of each uplink.
const UplinksDir = "uplinks"

var uplinkProgs = []string{serviceProgNodeportIn, serviceProgNodeportOut}

// AttachUplink puts the NodePort programs on interface ifname of namespace
// ns. An uplink already carrying them (a restarted proxy) is left as it is.
// It returns the pins it made.
func (p *Plane) AttachUplink(ns, ifname string) ([]string, error) {
	hook := p.Hook
	if hook == "" {
		hook = HookTCX
		if !tcxSupported() {
			hook = HookTC
		}
	}
	dir := p.uplinkDir(ns, ifname, hook)
	if p.uplinkAttached(ns, ifname, hook) {
		return nil, nil
	}
	_ = p.DetachUplink(ns, ifname) // stale pins of an interface that went
	var ifindex int
	if err := nsutil.Do(ns, func() error {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return fmt.Errorf("no interface %s in namespace %s: %w", ifname, ns, err)
		}
		ifindex = l.Attrs().Index
		return nil
	}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("uplink pin directory: %w", err)
	}
	pins := []string{dir}
	ps, err := p.programs()
	if err != nil {
		return nil, err
	}
	progs := []struct {
		prog *ebpf.Program
		at   ebpf.AttachType
	}{{ps.NodeportIn, ebpf.AttachTCXIngress}, {ps.NodeportOut, ebpf.AttachTCXEgress}}
	for i, pr := range progs {
		pin := filepath.Join(dir, uplinkProgs[i])
		var err error
		if hook == HookTCX {
			err = tcx.Attach(ns, ifindex, pr.prog, pr.at, pin)
		} else {
			err = attachTC(ns, ifindex, uplinkProgs[i], pr.prog, pr.at, pin)
		}
		if err != nil {
			_ = p.DetachUplink(ns, ifname)
			return nil, fmt.Errorf("attach %s to %s in %s (%s): %w", uplinkProgs[i], ifname, ns, hook, err)
		}
		pins = append(pins, pin)
	}
	return pins, nil
}

// SetNodeIP tells the NodePort programs the node's own address of ip's
// family (np_node, np6_node): the source of flows they SNAT (a backend on
// another node), which is not the address the client reached when that is
// an external IP.
func (p *Plane) SetNodeIP(ip netip.Addr) error {
	var err error
	switch {
	case ip.Is4():
		err = p.objs.NpNode.Update(uint32(0), be32(ip), ebpf.UpdateAny)
	case ip.Is6() && !ip.Is4In6() && ip.Zone() == "":
		err = p.objs.Np6Node.Update(uint32(0), addr6Words(ip), ebpf.UpdateAny)
	default:
		return fmt.Errorf("node IP %s: want an IPv4 or a global IPv6 address", ip)
	}
	if err != nil {
		return fmt.Errorf("node IP map: %w", err)
	}
	return nil
}

// uplinkAttached: the pins exist and the interface is still there.
func (p *Plane) uplinkAttached(ns, ifname string, h Hook) bool {
	dir := p.uplinkDir(ns, ifname, h)
	if _, err := os.Stat(filepath.Join(dir, uplinkProgs[1])); err != nil {
		return false
	}
	return attached(Endpoint{NS: ns, Ifname: ifname, Hook: h, Pins: []string{dir, filepath.Join(dir, uplinkProgs[0]), filepath.Join(dir, uplinkProgs[1])}})
}

// DetachUplink removes the NodePort programs from ifname in ns.
func (p *Plane) DetachUplink(ns, ifname string) error {
	var errs []error
	for _, h := range []Hook{HookTCX, HookTC} {
		dir := p.uplinkDir(ns, ifname, h)
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if h == HookTCX {
			for _, name := range uplinkProgs {
				if err := tcx.Detach(filepath.Join(dir, name)); err != nil {
					errs = append(errs, err)
				}
			}
		} else if err := detachTC(Endpoint{NS: ns, Ifname: ifname, Hook: h}); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NodePortStats are the NodePort programs' counters (np_stats), summed over CPUs.
type NodePortStats struct {
	DNAT      uint64 `json:"dnat_packets"`      // nodeIP:nodePort -> backend
	RNAT      uint64 `json:"rnat_packets"`      // replies translated back
	NewFlows  uint64 `json:"new_flows"`         // flows given a backend
	SNAT      uint64 `json:"snat_flows"`        // of those, SNATed to the node IP
	NoBackend uint64 `json:"no_backend_drops"`  // no endpoint (Local: none on this node)
	NoPort    uint64 `json:"no_snat_port"`      // no free SNAT port
	Errors    uint64 `json:"rewrite_err_drops"` // a rewrite helper failed (should stay 0)
}

// NodePortStats reads the counters.
func (p *Plane) NodePortStats() (NodePortStats, error) {
	v, err := SumCounters(p.objs.NpStats, "nodeport stats", 7)
	if err != nil {
		return NodePortStats{}, err
	}
	return NodePortStats{DNAT: v[0], RNAT: v[1], NewFlows: v[2], SNAT: v[3], NoBackend: v[4], NoPort: v[5], Errors: v[6]}, nil
}

// DetachUplinks removes the NodePort programs from every interface whose
// links the plane's pins record (DetachUplink each), whichever namespace
// and hook they name.
func (p *Plane) DetachUplinks() error {
	names, err := tcx.Dir(filepath.Join(p.dir, UplinksDir))
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		ep, ok := parseEpDir(name)
		if !ok {
			errs = append(errs, fmt.Errorf("uplink pins %s: not an uplink's directory", name))
			continue
		}
		errs = append(errs, p.DetachUplink(ep.NS, ep.Ifname))
	}
	return errors.Join(errs...)
}

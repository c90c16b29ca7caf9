package tcbpf

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"

	"github.com/cilium/ebpf"
)

// countFilters adds delta (+1 or -1) per Service to the programs'
// prefilters (bpf/lb.h, bpf/lb6.h): lb_vip16 counts IPv4 clusterIPs per
// /16, lb6_vip16 IPv6 ones per fold16, lb_bports backends per port (both
// families). Counts, not bits, so that deleting one Service never hides
// another with the same key. A key a TCP Service leaves (deleted, or a
// backend of it removed) is marked keptTCP for good: the connections
// established through it keep their backend (bpf/lb_pod_fam.h: a TCP
// segment after the SYN follows its conntrack entry, as kube-proxy's
// conntrack NAT does), and a prefilter at 0 would skip their packets'
// translation. The mark outlives the count, so that another Service
// leaving the key later (the UDP port of the same clusterIP, deleted after
// its TCP port) cannot take it to 0 either. A marked key costs its packets
// one hash lookup that finds nothing.
func (p *Plane) countFilters(ss []Service, delta int64) error {
	return p.countFiltersIn(ss, delta, p.prefilters())
}

// prefilter is one prefilter map and what it counts.
type prefilter struct {
	name string // the map's pin name
	what string // for errors
	m    *ebpf.Map
	keys func(Service) []uint32 // a Service's keys (none: not counted here)
}

func (p *Plane) prefilters() []prefilter {
	return []prefilter{
		{serviceMapLbVip16, "IPv4 clusterIP prefilter", p.objs.LbVip16, func(s Service) []uint32 {
			if !s.VIP.Is4() {
				return nil
			}
			v4 := s.VIP.As4()
			return []uint32{uint32(v4[0])<<8 | uint32(v4[1])}
		}},
		{serviceMapLb6Vip16, "IPv6 clusterIP prefilter", p.objs.Lb6Vip16, func(s Service) []uint32 {
			if s.VIP.Is4() {
				return nil
			}
			return []uint32{fold16(s.VIP)}
		}},
		{serviceMapLbBports, "backend port prefilter", p.objs.LbBports, func(s Service) []uint32 {
			var ks []uint32
			for _, b := range s.Backends {
				ks = append(ks, uint32(b.Port))
			}
			return ks
		}},
	}
}

func (p *Plane) countFiltersIn(ss []Service, delta int64, fs []prefilter) error {
	for _, f := range fs {
		counts := map[uint32]int64{}
		kept := map[uint32]bool{} // keys a TCP Service leaves: at least 1
		for _, s := range ss {
			for _, k := range f.keys(s) {
				counts[k] += delta
				kept[k] = kept[k] || delta < 0 && s.Proto == TCP
			}
		}
		if err := addCounts(f.m, counts, kept); err != nil {
			return fmt.Errorf("%s: %w", f.what, err)
		}
	}
	return nil
}

// fold16 is bpf/lb6.h's lb6_fold16: the xor of an IPv6 address's four
// 32-bit words as the (little-endian) CPU loads them, and of that word's
// two halves.
func fold16(ip netip.Addr) uint32 {
	b := ip.As16()
	var x uint32
	for i := 0; i < 16; i += 4 {
		x ^= binary.LittleEndian.Uint32(b[i:])
	}
	return x>>16 ^ x&0xffff
}

// keptTCP marks a prefilter key that a TCP Service left (countFilters):
// the programs read any value but 0 as "look up", and the count is in the
// bits below it (never near them: the maps hold at most 1M backends).
const keptTCP = 1 << 31

// addCounts adds deltas to m's counts; a key of kept that had a count is
// marked keptTCP.
func addCounts(m *ebpf.Map, deltas map[uint32]int64, kept map[uint32]bool) error {
	for k, d := range deltas {
		var v uint32
		if err := m.Lookup(&k, &v); err != nil {
			return err
		}
		mark := v & keptTCP
		if kept[k] && v != 0 {
			mark = keptTCP
		}
		n := max(int64(v&^keptTCP)+d, 0)
		if err := m.Update(&k, mark|uint32(n), ebpf.UpdateAny); err != nil {
			return err
		}
	}
	return nil
}

// rebuildFilters counts the Services into the prefilter arrays that Open
// just created (fresh: the pin paths it created) in a lab whose Services an
// older vnetlab build made: its maps are kept, those arrays are new.
func (p *Plane) rebuildFilters(fresh []string) error {
	var fs []prefilter
	for _, f := range p.prefilters() {
		if slices.Contains(fresh, filepath.Join(p.dir, f.name)) {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return nil
	}
	ss, err := p.ListServices()
	if err != nil {
		return err
	}
	return p.countFiltersIn(ss, +1, fs)
}

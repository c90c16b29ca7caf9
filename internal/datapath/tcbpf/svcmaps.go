package tcbpf

import (
	"encoding/binary"
	"net/netip"
	"structs"

	"github.com/cilium/ebpf"
)

// svcMaps are one address family's Service and backend maps: lb_services
// and lb_backends for IPv4, lb6_services and lb6_backends for IPv6
// (bpf/lb6.h). Both families share the service ids (lb_meta), the value of
// a Service entry (serviceLbSvc) and the backend key; only the addresses
// in the keys and backends differ. Every Service map access of the Go side
// goes through here, so one code path serves both families.
type svcMaps struct {
	v6       bool
	services *ebpf.Map
	backends *ebpf.Map
	slots    *ebpf.Map // lb_slots: each backend's slot, for the programs to find one that moved
}

// mapsOf returns the maps of vip's family.
func (p *Plane) mapsOf(vip netip.Addr) svcMaps {
	if vip.Is6() && !vip.Is4In6() {
		return svcMaps{v6: true, services: p.objs.Lb6Services, backends: p.objs.Lb6Backends, slots: p.objs.Lb6Slots}
	}
	return svcMaps{services: p.objs.LbServices, backends: p.objs.LbBackends, slots: p.objs.LbSlots}
}

// families are both families' maps, IPv4 first.
func (p *Plane) families() []svcMaps {
	return []svcMaps{p.mapsOf(netip.IPv4Unspecified()), p.mapsOf(netip.IPv6Unspecified())}
}

// key is the Service map key of s in m's family.
func (m svcMaps) key(s Service) any {
	scope := uint8(scopeAll)
	if s.External {
		scope = scopeExternal
	}
	if m.v6 {
		return &serviceLb6SvcKey{Vip: addr6Words(s.VIP), Port: be16(s.Port), Proto: uint8(s.Proto), Scope: scope}
	}
	return &serviceLbSvcKey{Vip: be32(s.VIP), Port: be16(s.Port), Proto: uint8(s.Proto), Scope: scope}
}

func (m svcMaps) lookup(s Service) (serviceLbSvc, error) {
	var v serviceLbSvc
	err := m.services.Lookup(m.key(s), &v)
	return v, err
}

func (m svcMaps) put(s Service, v serviceLbSvc, flags ebpf.MapUpdateFlags) error {
	return m.services.Update(m.key(s), &v, flags)
}

func (m svcMaps) del(s Service) error { return m.services.Delete(m.key(s)) }

// putBackend writes backend b into slot of Service id, and where it is
// into lb_slots.
func (m svcMaps) putBackend(id uint32, slot int, b Backend) error {
	k := serviceLbBackendKey{SvcId: id, Slot: uint32(slot)}
	var err error
	if m.v6 {
		err = m.backends.Update(&k, &serviceLb6Backend{Ip: addr6Words(b.IP), Port: be16(b.Port)}, ebpf.UpdateAny)
	} else {
		err = m.backends.Update(&k, &serviceLbBackend{Ip: be32(b.IP), Port: be16(b.Port)}, ebpf.UpdateAny)
	}
	if err != nil {
		return err
	}
	at := uint32(slot)
	return m.slots.Update(m.slotKey(id, b), &at, ebpf.UpdateAny)
}

// slotKey is backend b's key in lb_slots for Service id.
func (m svcMaps) slotKey(id uint32, b Backend) any {
	if m.v6 {
		return &serviceLb6SlotKey{SvcId: id, Ip: addr6Words(b.IP), Port: be16(b.Port)}
	}
	return &serviceLbSlotKey{SvcId: id, Ip: be32(b.IP), Port: be16(b.Port)}
}

// forgetSlot deletes b's lb_slots entry if it still names slot.
func (m svcMaps) forgetSlot(id uint32, slot int, b Backend) {
	var at uint32
	if k := m.slotKey(id, b); m.slots.Lookup(k, &at) == nil && at == uint32(slot) {
		_ = m.slots.Delete(k)
	}
}

func (m svcMaps) backend(id uint32, slot uint32) (Backend, error) {
	k := serviceLbBackendKey{SvcId: id, Slot: slot}
	if m.v6 {
		var b serviceLb6Backend
		err := m.backends.Lookup(&k, &b)
		return Backend{IP: addrOf6(b.Ip), Port: portOf(b.Port)}, err
	}
	var b serviceLbBackend
	err := m.backends.Lookup(&k, &b)
	return Backend{IP: addrOf(b.Ip), Port: portOf(b.Port)}, err
}

// delBackend empties slot of Service id, which held backend was.
func (m svcMaps) delBackend(id uint32, slot int, was Backend) {
	_ = m.backends.Delete(&serviceLbBackendKey{SvcId: id, Slot: uint32(slot)})
	m.forgetSlot(id, slot, was)
}

// entry is one Service map entry as it is iterated: its frontend and value.
type entry struct {
	vip      netip.Addr
	port     uint16
	proto    Proto
	external bool
	v        serviceLbSvc
}

// entries lists every entry of m's Service map.
func (m svcMaps) entries() ([]entry, error) {
	var (
		out []entry
		v   serviceLbSvc
	)
	if m.v6 {
		var k serviceLb6SvcKey
		it := m.services.Iterate()
		for it.Next(&k, &v) {
			out = append(out, entry{addrOf6(k.Vip), portOf(k.Port), Proto(k.Proto), k.Scope == scopeExternal, v})
		}
		return out, it.Err()
	}
	var k serviceLbSvcKey
	it := m.services.Iterate()
	for it.Next(&k, &v) {
		out = append(out, entry{addrOf(k.Vip), portOf(k.Port), Proto(k.Proto), k.Scope == scopeExternal, v})
	}
	return out, it.Err()
}

// Addresses and ports in network byte order, as the programs keep them,
// each IPv4 helper beside its IPv6 twin.

func be16(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}

func portOf(v uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], v)
	return binary.BigEndian.Uint16(b[:])
}

// addr6Raw is an IPv6 address as bpf2go generates struct lb6_addr: four
// words, each holding four bytes in network order.
type addr6Raw = struct {
	_ structs.HostLayout
	W [4]uint32
}

func be32(a netip.Addr) uint32 { b := a.As4(); return binary.NativeEndian.Uint32(b[:]) }

func addr6Words(a netip.Addr) addr6Raw {
	var w addr6Raw
	b := a.As16()
	for i := range w.W {
		w.W[i] = binary.NativeEndian.Uint32(b[4*i:])
	}
	return w
}

func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func addrOf6(w addr6Raw) netip.Addr {
	var b [16]byte
	for i, x := range w.W {
		binary.NativeEndian.PutUint32(b[4*i:], x)
	}
	return netip.AddrFrom16(b)
}

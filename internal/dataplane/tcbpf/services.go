package tcbpf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// Proto is a Service's L4 protocol (its IP protocol number).
type Proto uint8

const (
	TCP Proto = 6
	UDP Proto = 17
)

func (p Proto) String() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	}
	return fmt.Sprintf("proto-%d", uint8(p))
}

// ParseProto reads "tcp" or "udp".
func ParseProto(s string) (Proto, error) {
	switch strings.ToLower(s) {
	case "tcp":
		return TCP, nil
	case "udp":
		return UDP, nil
	}
	return 0, fmt.Errorf("protocol %q: want tcp or udp", s)
}

// MaxBackends is the most backends one Service may have (slots are u16).
const MaxBackends = 65535

// Backend is one pod address behind a Service.
type Backend struct {
	IP   netip.Addr `json:"ip"`
	Port uint16     `json:"port"`
}

func (b Backend) String() string { return netip.AddrPortFrom(b.IP, b.Port).String() }

// CompareBackends orders backends by address, then port.
func CompareBackends(a, b Backend) int {
	if c := a.IP.Compare(b.IP); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

// Service is clusterIP:port/proto -> backends. ID is assigned by AddService.
type Service struct {
	VIP      netip.Addr `json:"vip"`
	Port     uint16     `json:"port"`
	Proto    Proto      `json:"proto"`
	Backends []Backend  `json:"backends"`
	ID       uint32     `json:"id"`
	// Affinity is Kubernetes' sessionAffinity ClientIP: a client's new
	// flows keep the backend of its last one for this many seconds after
	// it (0: none, every flow is placed by its hash).
	Affinity uint32 `json:"affinity_seconds,omitempty"`
	// External marks the entry that serves only clients outside the node
	// (the uplink's nodeport_in), beside the frontend's entry for every
	// client: a NodePort or external IP of a Service whose
	// externalTrafficPolicy is Local holds this node's endpoints there and
	// every endpoint in the other (pods and the node itself reach them all,
	// as with kube-proxy). bpf/lb.h's LB_SCOPE_EXTERNAL.
	External bool `json:"external,omitempty"`
	// HasExternal (an entry for every client) tells nodeport_in to serve
	// outside clients from the frontend's External entry, which must exist
	// while it is set (LB_SVC_EXTERNAL).
	HasExternal bool `json:"has_external,omitempty"`
}

// MaxAffinity is the longest affinity timeout (Kubernetes' limit, a day).
const MaxAffinity = 86400

// Mirrors of bpf/lb.h's LB_SVC_* flags and LB_SCOPE_* values.
const (
	svcAffinity = 0x1
	svcExternal = 0x2

	scopeAll      = 0
	scopeExternal = 1
)

// value is the Service map's value for s with id.
func (s Service) value(id uint32) serviceLbSvc {
	v := serviceLbSvc{Id: id, Count: uint16(len(s.Backends)), AffinityTimeout: s.Affinity}
	if s.Affinity > 0 {
		v.Flags |= svcAffinity
	}
	if s.HasExternal {
		v.Flags |= svcExternal
	}
	return v
}

// frontendKey names one Service map entry, whatever the family.
type frontendKey struct {
	vip      netip.Addr
	port     uint16
	proto    Proto
	external bool
}

func (s Service) frontend() frontendKey { return frontendKey{s.VIP, s.Port, s.Proto, s.External} }

func (s Service) String() string {
	if s.External {
		return fmt.Sprintf("%s/%s (external)", netip.AddrPortFrom(s.VIP, s.Port), s.Proto)
	}
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(s.VIP, s.Port), s.Proto)
}

// ErrExists and ErrNotFound are returned (wrapped) by AddService and DelService.
var (
	ErrExists   = errors.New("service already exists")
	ErrNotFound = errors.New("no such service")
)

// Validate checks what the data plane needs: IPv4 or IPv6 addresses, one
// family per Service, ports 1-65535, tcp or udp, no duplicate backends.
func (s Service) Validate() error {
	v6 := s.VIP.Is6()
	if !s.VIP.IsValid() || s.VIP.Is4In6() || s.VIP.Zone() != "" {
		return fmt.Errorf("service %s: the clusterIP must be an IPv4 or IPv6 address", s)
	}
	if s.Port == 0 {
		return fmt.Errorf("service %s: port 0: use 1-65535", s)
	}
	if s.Proto != TCP && s.Proto != UDP {
		return fmt.Errorf("service %s: protocol must be tcp or udp", s)
	}
	if s.Affinity > MaxAffinity {
		return fmt.Errorf("service %s: affinity timeout %ds: at most %d (a day)", s, s.Affinity, MaxAffinity)
	}
	if s.External && s.HasExternal {
		return fmt.Errorf("service %s: an external entry cannot point to another", s)
	}
	if len(s.Backends) > MaxBackends {
		return fmt.Errorf("service %s: %d backends, at most %d", s, len(s.Backends), MaxBackends)
	}
	seen := map[Backend]bool{}
	for _, b := range s.Backends {
		if !b.IP.IsValid() || b.IP.Is6() != v6 || b.IP.Is4In6() || b.IP.Zone() != "" {
			return fmt.Errorf("service %s: backend %s: must be an %s address, as the clusterIP", s, b, familyName(v6))
		}
		if b.Port == 0 {
			return fmt.Errorf("service %s: backend %s: port 0: use 1-65535", s, b)
		}
		if seen[b] {
			return fmt.Errorf("service %s: backend %s is listed twice", s, b)
		}
		seen[b] = true
	}
	return nil
}

// Network byte order, as the programs keep addresses and ports.
func be32(a netip.Addr) uint32 { b := a.As4(); return binary.NativeEndian.Uint32(b[:]) }
func be16(p uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], p)
	return binary.NativeEndian.Uint16(b[:])
}
func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.NativeEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
func portOf(v uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], v)
	return binary.BigEndian.Uint16(b[:])
}

func familyName(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

// AddService adds one Service; it fails (ErrExists) if vip:port/proto is taken.
func (p *Plane) AddService(s Service) error { return p.AddServices([]Service{s}) }

// AddServices adds many Services at once (thousands for scale tests): all
// are validated first, so bad input adds none.
func (p *Plane) AddServices(ss []Service) (err error) {
	seen := map[frontendKey]bool{}
	for _, s := range ss {
		if err := s.Validate(); err != nil {
			return err
		}
		if seen[s.frontend()] {
			return fmt.Errorf("service %s is given twice", s)
		}
		seen[s.frontend()] = true
		if _, err := p.mapsOf(s.VIP).lookup(s); err == nil {
			return fmt.Errorf("service %s: %w (delete it first)", s, ErrExists)
		}
	}
	id, err := p.nextIDs(uint32(len(ss)))
	if err != nil {
		return err
	}
	// Prefilters first: a Service must never be in the map while the
	// programs' prefilter still says its clusterIP has none.
	if err := p.countFilters(ss, +1); err != nil {
		return err
	}
	added := 0
	defer func() {
		if err != nil { // all or nothing
			for _, s := range ss[:added] {
				_ = p.DelEntry(s)
			}
			_ = p.countFilters(ss[added:], -1)
		}
	}()
	for i := range ss {
		s := ss[i]
		m := p.mapsOf(s.VIP)
		// Backends first: the programs never see a count larger than the slots filled.
		for slot, b := range s.Backends {
			if uerr := m.putBackend(id, slot, b); uerr != nil {
				m.delBackends(id, slot)
				err = fmt.Errorf("service %s: backend map: %w", s, uerr)
				return err
			}
		}
		if uerr := m.put(s, s.value(id), ebpf.UpdateNoExist); uerr != nil {
			m.delBackends(id, len(s.Backends))
			if errors.Is(uerr, ebpf.ErrKeyExist) {
				err = fmt.Errorf("service %s: %w", s, ErrExists)
			} else {
				err = fmt.Errorf("service %s: service map: %w", s, uerr)
			}
			return err
		}
		ss[i].ID = id
		added++
		id++
	}
	return nil
}

// nextIDs reserves n service ids from lb_meta. Ids are never reused, so
// conntrack entries of a deleted Service never match its successor.
func (p *Plane) nextIDs(n uint32) (uint32, error) {
	var zero, next uint32
	if err := p.objs.LbMeta.Lookup(&zero, &next); err != nil {
		return 0, fmt.Errorf("service id counter: %w", err)
	}
	if next == 0 {
		next = 1
	}
	if next+n < next {
		return 0, fmt.Errorf("service ids exhausted: recreate the lab")
	}
	end := next + n
	if err := p.objs.LbMeta.Update(&zero, &end, ebpf.UpdateAny); err != nil {
		return 0, fmt.Errorf("service id counter: %w", err)
	}
	return next, nil
}

func (m svcMaps) delBackends(id uint32, n int) {
	for slot := 0; slot < n; slot++ {
		m.delBackend(id, slot)
	}
}

// DelService removes a Service (its entry for every client). Its flows
// stop being translated at once; their conntrack entries age out of the LRU.
func (p *Plane) DelService(vip netip.Addr, port uint16, proto Proto) error {
	return p.DelEntry(Service{VIP: vip, Port: port, Proto: proto})
}

// DelEntry removes the entry s names (VIP, Port, Proto, External; the rest
// of s is ignored), as DelService.
func (p *Plane) DelEntry(s Service) error {
	m := p.mapsOf(s.VIP)
	name := s.String()
	v, err := m.lookup(s)
	if err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("service %s: %w", name, ErrNotFound)
		}
		return err
	}
	gone := Service{VIP: s.VIP, Port: s.Port, Proto: s.Proto}
	// Its backend ports leave the prefilter with it (a slot already gone
	// just counts for nothing).
	gone.Backends, _ = m.backendsOf(v)
	if err := m.del(s); err != nil {
		return fmt.Errorf("service %s: %w", name, err)
	}
	m.delBackends(v.Id, int(v.Count))
	return p.countFilters([]Service{gone}, -1)
}

// countFilters adds delta (+1 or -1) per Service to the programs'
// prefilters (bpf/lb.h, bpf/lb6.h): lb_vip16 counts IPv4 clusterIPs per
// /16, lb6_vip16 IPv6 ones per fold16, lb_bports backends per port (both
// families). Counts, not bits, so that deleting one Service never hides
// another with the same key.
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
		for _, s := range ss {
			for _, k := range f.keys(s) {
				counts[k] += delta
			}
		}
		if err := addCounts(f.m, counts); err != nil {
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

func addCounts(m *ebpf.Map, deltas map[uint32]int64) error {
	for k, d := range deltas {
		var v uint32
		if err := m.Lookup(&k, &v); err != nil {
			return err
		}
		n := max(int64(v)+d, 0)
		if err := m.Update(&k, uint32(n), ebpf.UpdateAny); err != nil {
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

// backendsOf reads a Service's backends, slot by slot; on a missing slot it
// returns those read so far and the error.
func (m svcMaps) backendsOf(v serviceLbSvc) ([]Backend, error) {
	var out []Backend
	for slot := uint32(0); slot < uint32(v.Count); slot++ {
		b, err := m.backend(v.Id, slot)
		if err != nil {
			return out, fmt.Errorf("backend slot %d: %w", slot, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// currentBackends re-reads Service s and its backends while another process
// may be rewriting them, until a reading is whole (a few tries, a
// millisecond apart at most); gone: s was deleted meanwhile.
func (m svcMaps) currentBackends(s Service) (bs []Backend, gone bool, err error) {
	for try := range 10 {
		var v serviceLbSvc
		v, err = m.lookup(s)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		if bs, err = m.backendsOf(v); !errors.Is(err, ebpf.ErrKeyNotExist) {
			return bs, false, err
		}
		time.Sleep(time.Duration(try) * 100 * time.Microsecond)
	}
	return bs, false, err
}

// ListServices returns every Service of both families, sorted by
// clusterIP (IPv4 first), port, protocol.
func (p *Plane) ListServices() ([]Service, error) {
	var out []Service
	for _, m := range p.families() {
		es, err := m.entries()
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			v := e.v
			s := Service{VIP: e.vip, Port: e.port, Proto: e.proto, ID: v.Id,
				External: e.external, HasExternal: v.Flags&svcExternal != 0}
			if v.Flags&svcAffinity != 0 {
				s.Affinity = v.AffinityTimeout
			}
			if s.Backends, err = m.backendsOf(v); errors.Is(err, ebpf.ErrKeyNotExist) {
				// A writer (the proxy's sync) changed the Service since
				// entries() read it: read it again as it is now.
				var gone bool
				s.Backends, gone, err = m.currentBackends(s)
				if gone {
					continue
				}
			}
			if err != nil {
				return nil, fmt.Errorf("service %s: %w", s, err)
			}
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if c := a.VIP.Compare(b.VIP); c != 0 {
			return c < 0
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		if a.Proto != b.Proto {
			return a.Proto < b.Proto
		}
		return !a.External && b.External
	})
	return out, nil
}

// Stats are the programs' counters, summed over CPUs, since the lab's maps
// were created.
type Stats struct {
	DNAT      uint64 `json:"dnat_packets"`      // clusterIP -> backend
	RNAT      uint64 `json:"rnat_packets"`      // backend -> clusterIP (replies)
	NewFlows  uint64 `json:"new_flows"`         // conntrack misses that picked a backend
	NoBackend uint64 `json:"no_backend_drops"`  // packets to a Service without backends
	ICMP      uint64 `json:"icmp_errors"`       // ICMP errors about a translated flow
	Frags     uint64 `json:"fragments"`         // non-first fragments translated
	Hairpin   uint64 `json:"hairpin_flows"`     // flows whose backend is the client itself
	Errors    uint64 `json:"rewrite_err_drops"` // a rewrite helper failed (should stay 0)

	// A TCP SYN or UDP datagram to a Service without backends answered
	// with ICMP port unreachable (kube-proxy's REJECT); NoBackend counts
	// the packets that could not be answered (a flow's later segments).
	Rejects uint64 `json:"no_backend_rejects"`
}

// Stats reads the counters.
func (p *Plane) Stats() (Stats, error) { return statsOf(p.objs.LbStats) }

// statsOf reads lb_stats.
func statsOf(m *ebpf.Map) (s Stats, err error) {
	err = readCounters(m, "stats", &s.DNAT, &s.RNAT, &s.NewFlows, &s.NoBackend, &s.ICMP, &s.Frags, &s.Hairpin, &s.Errors, &s.Rejects)
	return s, err
}

// Stats6 are the IPv6 programs' counters (bpf/lb6.h's lb6_stats), summed
// over CPUs: as Stats, and the IPv6 packets left to the stack untouched.
type Stats6 struct {
	DNAT      uint64 `json:"dnat_packets"`
	RNAT      uint64 `json:"rnat_packets"`
	NewFlows  uint64 `json:"new_flows"`
	NoBackend uint64 `json:"no_backend_drops"`
	ICMP      uint64 `json:"icmp_errors"`
	Frags     uint64 `json:"fragments"`
	Errors    uint64 `json:"rewrite_err_drops"`
	// More extension headers than the programs walk (LB6_MAX_EXTHDRS).
	ExtHdrPass uint64 `json:"exthdr_chain_passed"`
	// A cut-off IPv6, extension, TCP/UDP header or ICMPv6 quote.
	TruncPass uint64 `json:"truncated_passed"`
	// Answered with ICMPv6 port unreachable: a Service without backends.
	Rejects uint64 `json:"no_backend_rejects"`
}

// Stats6 reads the IPv6 counters.
func (p *Plane) Stats6() (Stats6, error) { return stats6Of(p.objs.Lb6Stats) }

// stats6Of reads lb6_stats.
func stats6Of(m *ebpf.Map) (s Stats6, err error) {
	err = readCounters(m, "IPv6 stats", &s.DNAT, &s.RNAT, &s.NewFlows, &s.NoBackend, &s.ICMP, &s.Frags, &s.Errors, &s.ExtHdrPass, &s.TruncPass, &s.Rejects)
	return s, err
}

// SumCounters reads the first n counters of a per-CPU array, summed over
// CPUs (what: the counters' name, for errors). The socket programs' too.
func SumCounters(m *ebpf.Map, what string, n int) ([]uint64, error) {
	v := make([]uint64, n)
	for i := range v {
		var per []uint64
		if err := m.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		for _, x := range per {
			v[i] += x
		}
	}
	return v, nil
}

// Flow is one conntrack entry in the forward direction.
type Flow struct {
	Client  netip.AddrPort `json:"client"`
	Service netip.AddrPort `json:"service"`
	Proto   Proto          `json:"proto"`
	Backend netip.AddrPort `json:"backend"`
	Hairpin bool           `json:"hairpin,omitempty"`
}

// Flows lists the conntrack's forward entries, IPv4 then IPv6 (at most
// limit; 0 = all).
func (p *Plane) Flows(limit int) ([]Flow, error) {
	out, err := appendFlows(nil, p.objs.LbConntrack, limit, func(k *serviceLbCtKey, v *serviceLbCt) (Flow, bool) {
		return Flow{Client: addrPort(addrOf(k.Saddr), k.Sport), Service: addrPort(addrOf(k.Daddr), k.Dport), Proto: Proto(k.Proto),
			Backend: addrPort(addrOf(v.Addr), v.Port), Hairpin: v.Flags&ctHairpin != 0}, k.Dir == ctFwd
	})
	if err != nil {
		return nil, err
	}
	return appendFlows(out, p.objs.Lb6Conntrack, limit, func(k *serviceLb6CtKey, v *serviceLb6Ct) (Flow, bool) {
		return Flow{Client: addrPort(addrOf6(k.Saddr), k.Sport), Service: addrPort(addrOf6(k.Daddr), k.Dport), Proto: Proto(k.Proto),
			Backend: addrPort(addrOf6(v.Addr), v.Port)}, k.Dir == ctFwd
	})
}

// appendFlows appends to out the entries of conntrack map m that flow
// makes a Flow of (its forward entries), until out holds limit (0: no
// limit): one walk for either family's conntrack.
func appendFlows[K, V any](out []Flow, m *ebpf.Map, limit int, flow func(k *K, v *V) (Flow, bool)) ([]Flow, error) {
	var (
		k K
		v V
	)
	it := m.Iterate()
	for (limit <= 0 || len(out) < limit) && it.Next(&k, &v) {
		if f, ok := flow(&k, &v); ok {
			out = append(out, f)
		}
	}
	return out, it.Err()
}

// Mirrors of bpf/lb.h's and bpf/nodeport.h's enums.
const (
	ctFwd     = 1
	ctRev     = 2
	ctHairpin = 1
	npSNAT    = 1
)

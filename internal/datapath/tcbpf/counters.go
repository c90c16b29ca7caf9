package tcbpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

// Counters are a lab's tc programs' counters, summed over CPUs since its
// maps were created: the Service translation per family and host routing.
type Counters struct {
	IPv4 Stats     `json:"ipv4"`
	IPv6 Stats6    `json:"ipv6"`
	Host HostStats `json:"host_routing"`
}

// ErrNoPrograms: the lab has no tc programs' maps (no eBPF mode, no ebpf
// provider).
var ErrNoPrograms = errors.New("no eBPF programs")

// ReadCounters reads lab's counters from its pinned maps, read-only: it
// loads no program and creates nothing (unlike Open).
func ReadCounters(lab string) (Counters, error) {
	var c Counters
	if !HasPin(lab, serviceMapLbStats) {
		return c, ErrNoPrograms
	}
	err := errors.Join(
		ReadPinned(lab, serviceMapLbStats, func(m *ebpf.Map) (err error) { c.IPv4, err = statsOf(m); return }),
		ReadPinned(lab, serviceMapLb6Stats, func(m *ebpf.Map) (err error) { c.IPv6, err = stats6Of(m); return }),
		ReadPinned(lab, serviceMapHostStats, func(m *ebpf.Map) (err error) { c.Host, err = hostStatsOf(m); return }),
	)
	return c, err
}

// HasPin says whether lab's pin directory holds name (on any other error
// than its absence, yes: opening it then says what is wrong).
func HasPin(lab, name string) bool {
	_, err := os.Stat(filepath.Join(PinDir(lab), name))
	return !errors.Is(err, os.ErrNotExist)
}

// ReadPinned opens lab's pinned map name read-only for read (the socket
// programs' maps are pinned beside the tc programs').
func ReadPinned(lab, name string, read func(*ebpf.Map) error) error {
	m, err := ebpf.LoadPinnedMap(filepath.Join(PinDir(lab), name), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("lab %s's %s: %w", lab, name, err)
	}
	defer m.Close()
	return read(m)
}

// readCounters reads the first len(dst) counters of a per-CPU array, summed
// over CPUs, into dst in the map's order: one reader for each family's
// counters (lb_stats, lb6_stats). On an error dst is left as it was.
func readCounters(m *ebpf.Map, what string, dst ...*uint64) error {
	v, err := SumCounters(m, what, len(dst))
	if err != nil {
		return err
	}
	for i, d := range dst {
		*d = v[i]
	}
	return nil
}

// Stats are the IPv4 Service programs' counters (lb_stats), summed over
// CPUs, since the lab's maps were created.
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

// counters are s's fields in bpf/lb.h's LB_STAT_* order (their indexes in
// lb_stats and lb6_stats), up to LB_STAT_IPV4_MAX.
func (s *Stats) counters() []*uint64 {
	return []*uint64{&s.DNAT, &s.RNAT, &s.NewFlows, &s.NoBackend, &s.ICMP, &s.Frags, &s.Hairpin, &s.Errors, &s.Rejects}
}

// Stats reads the counters.
func (p *Plane) Stats() (Stats, error) { return statsOf(p.objs.LbStats) }

// statsOf reads lb_stats.
func statsOf(m *ebpf.Map) (s Stats, err error) {
	err = readCounters(m, "stats", s.counters()...)
	return s, err
}

// Stats6 are the IPv6 programs' counters (bpf/lb6.h's lb6_stats), summed
// over CPUs: as Stats, without hairpins (not counted over IPv6), and the
// IPv6 packets left to the stack untouched.
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

// counters are s's fields in LB_STAT_* order, as Stats', to LB_STAT_MAX;
// LB_STAT_HAIRPIN's slot (never counted over IPv6) is read and dropped.
func (s *Stats6) counters() []*uint64 {
	var hairpin uint64
	return []*uint64{&s.DNAT, &s.RNAT, &s.NewFlows, &s.NoBackend, &s.ICMP, &s.Frags, &hairpin, &s.Errors, &s.Rejects,
		&s.ExtHdrPass, &s.TruncPass}
}

// Stats6 reads the IPv6 counters.
func (p *Plane) Stats6() (Stats6, error) { return stats6Of(p.objs.Lb6Stats) }

// stats6Of reads lb6_stats.
func stats6Of(m *ebpf.Map) (s Stats6, err error) {
	err = readCounters(m, "IPv6 stats", s.counters()...)
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

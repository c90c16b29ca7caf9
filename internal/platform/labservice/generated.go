package labservice

import (
	"fmt"
	"net/netip"

	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Generated services (--extra-services N) measure lookup cost at scale: N
// dummy services in a range of their own, each with a backend in another
// range, never dialed. Like a real cluster, every provider has to look past
// them to find the service under test. One backend each, like the 45k-service
// cluster of kubernetes#139513: a multi-endpoint service costs nftables an
// anonymous numgen map, and the kernel scans every set of the table to name
// each new one, so loading grows quadratically (measured here: 10k
// two-endpoint services 14 s, one-endpoint 1.8 s).
//
// A lab with IPv6 gets N of them per family it measures, as a dual-stack
// cluster's kube-proxy runs one proxier per family, each with every Service.
var (
	GeneratedRange        = netip.MustParsePrefix("10.97.0.0/16")
	GeneratedBackendRange = netip.MustParsePrefix("10.98.0.0/16")
	// The IPv6 ranges are /112s: as many addresses as the IPv4 /16s.
	GeneratedRange6        = netip.MustParsePrefix("fd00:10:97::/112")
	GeneratedBackendRange6 = netip.MustParsePrefix("fd00:10:98::/112")
)

const (
	// GeneratedPorts: each generated clusterIP carries this many ports (8080, 8081).
	GeneratedPorts    = 2
	GeneratedBasePort = 8080
	GeneratedBackends = 1
	// MaxExtra is how many generated services fit in GeneratedRange (and in
	// GeneratedRange6).
	MaxExtra = GeneratedPorts * 65534
)

// GeneratedRanges are the clusterIP and backend ranges of family f's
// generated services.
func GeneratedRanges(f family.Family) (vips, backends netip.Prefix) {
	if f == family.IPv6 {
		return GeneratedRange6, GeneratedBackendRange6
	}
	return GeneratedRange, GeneratedBackendRange
}

// Generated returns the i-th generated service of family f (ipv4 or ipv6;
// deterministic, so only the count is stored).
func Generated(f family.Family, i int) Service {
	vips, backends := GeneratedRanges(f)
	s := Service{VIP: nth(vips, 1+i/GeneratedPorts), Port: uint16(GeneratedBasePort + i%GeneratedPorts), Proto: TCP}
	for j := 0; j < GeneratedBackends; j++ {
		s.Backends = append(s.Backends, Backend{IP: nth(backends, 1+(i*GeneratedBackends+j)%65534), Port: GeneratedBasePort})
	}
	return s
}

// nth is p's address plus i, added to the last 32 bits (the ranges are a /16
// and /112s, so nothing carries further).
func nth(p netip.Prefix, i int) netip.Addr {
	b := p.Addr().As16()
	v := uint32(b[12])<<24 | uint32(b[13])<<16 | uint32(b[14])<<8 | uint32(b[15])
	v += uint32(i)
	b[12], b[13], b[14], b[15] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	a := netip.AddrFrom16(b)
	if p.Addr().Is4() {
		return a.Unmap()
	}
	return a
}

// inGeneratedRanges says whether a is in any range reserved for generated
// services or their backends.
func inGeneratedRanges(a netip.Addr) bool {
	for _, p := range []netip.Prefix{GeneratedRange, GeneratedBackendRange, GeneratedRange6, GeneratedBackendRange6} {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// CheckExtra says whether n generated services fit GeneratedRange (the
// one range check; callers name the field: "N: want 0 to MAX ...").
func CheckExtra(n int) error {
	if n < 0 || n > MaxExtra {
		return fmt.Errorf("%d: want 0 to %d (the generated range %s has room for that many)", n, MaxExtra, GeneratedRange)
	}
	return nil
}

package service

import (
	"fmt"
	"net/netip"
)

// Generated services (--extra-services N) measure lookup cost at scale: N
// dummy services in a range of their own, each with a backend in another
// range, never dialed. Like a real cluster, every provider has to look past
// them to find the service under test. One backend each, like the 45k-service
// cluster of kubernetes#139513: a multi-endpoint service costs nftables an
// anonymous numgen map, and the kernel scans every set of the table to name
// each new one, so loading grows quadratically (measured here: 10k
// two-endpoint services 14 s, one-endpoint 1.8 s).
var (
	GeneratedRange        = netip.MustParsePrefix("10.97.0.0/16")
	GeneratedBackendRange = netip.MustParsePrefix("10.98.0.0/16")
)

const (
	// GeneratedPorts: each generated clusterIP carries this many ports (8080, 8081).
	GeneratedPorts    = 2
	GeneratedBasePort = 8080
	GeneratedBackends = 1
	// MaxExtra is how many generated services fit in GeneratedRange.
	MaxExtra = GeneratedPorts * 65534
)

// Generated returns the i-th generated service (deterministic, so only the
// count is stored).
func Generated(i int) Service {
	vip := nth(GeneratedRange, 1+i/GeneratedPorts)
	s := Service{VIP: vip, Port: uint16(GeneratedBasePort + i%GeneratedPorts), Proto: TCP}
	for j := 0; j < GeneratedBackends; j++ {
		ip := nth(GeneratedBackendRange, 1+(i*GeneratedBackends+j)%65534)
		s.Backends = append(s.Backends, Backend{IP: ip, Port: GeneratedBasePort})
	}
	return s
}

func nth(p netip.Prefix, i int) netip.Addr {
	b := p.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// CheckExtra says whether n generated services fit GeneratedRange (the
// one range check; callers name the field: "N: want 0 to MAX ...").
func CheckExtra(n int) error {
	if n < 0 || n > MaxExtra {
		return fmt.Errorf("%d: want 0 to %d (the generated range %s has room for that many)", n, MaxExtra, GeneratedRange)
	}
	return nil
}

package family

import (
	"net/netip"
	"testing"
)

func TestOfAddrs(t *testing.T) {
	a := netip.MustParseAddr
	for _, c := range []struct {
		addrs []netip.Addr
		want  Family
	}{
		{nil, IPv4},
		{[]netip.Addr{a("10.0.0.1")}, IPv4},
		{[]netip.Addr{a("::ffff:10.0.0.1")}, IPv4},
		{[]netip.Addr{a("fd00::1")}, IPv6},
		{[]netip.Addr{a("10.0.0.1"), a("fd00::1")}, Dual},
	} {
		if got := OfAddrs(c.addrs); got != c.want {
			t.Errorf("OfAddrs(%v) = %s, want %s", c.addrs, got, c.want)
		}
	}
}

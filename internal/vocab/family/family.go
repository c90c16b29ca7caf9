// Package family names the IP families a lab carries and a cell measures:
// ipv4, ipv6, or dual (both; a dual-stack lab's cells measure each family
// on the same pods). Vocabulary: it imports nothing of vnetlab's.
package family

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Family is a lab's IP family (--ip-family, the scenario's ip_family).
type Family string

const (
	IPv4 Family = "ipv4"
	IPv6 Family = "ipv6"
	Dual Family = "dual" // both: pods get an address of each family
)

// All are the families a lab can have, the default first.
var All = []Family{IPv4, IPv6, Dual}

// Parse reads ipv4, ipv6 or dual ("" is ipv4).
func Parse(s string) (Family, error) {
	switch f := Family(strings.ToLower(strings.TrimSpace(s))); f {
	case "":
		return IPv4, nil
	case IPv4, IPv6, Dual:
		return f, nil
	}
	return "", fmt.Errorf("IP family %q: use ipv4, ipv6 or dual", s)
}

// Or is f, or ipv4 when f is unset (specs and state written before
// families existed).
func (f Family) Or() Family {
	if f == "" {
		return IPv4
	}
	return f
}

// HasIPv4 says whether the lab's pods have IPv4 addresses.
func (f Family) HasIPv4() bool { return f.Or() != IPv6 }

// HasIPv6 says whether the lab's pods have IPv6 addresses.
func (f Family) HasIPv6() bool { return f.Or() != IPv4 }

// Measured are the address families a lab of family f measures, IPv4
// first: both for a dual-stack lab.
func (f Family) Measured() []Family {
	switch f.Or() {
	case IPv6:
		return []Family{IPv6}
	case Dual:
		return []Family{IPv4, IPv6}
	}
	return []Family{IPv4}
}

// Cell is the family as a results cell's coordinate (results.CellID.Family):
// "" for IPv4, so that files written before families existed keep their
// cells' names and keys; "ipv6" for IPv6.
func (f Family) Cell() string {
	if f.Or() == IPv4 {
		return ""
	}
	return string(f)
}

// OfCell is the address family of a cell's coordinate ("" is IPv4).
func OfCell(s string) Family { return Family(s).Or() }

// Of is the address family of a.
func Of(a netip.Addr) Family {
	if a.Is4() || a.Is4In6() {
		return IPv4
	}
	return IPv6
}

// OfAddrs is the family of a set of addresses (a node's): dual when it
// has both, IPv4 when it has none.
func OfAddrs(addrs []netip.Addr) Family {
	v4 := slices.ContainsFunc(addrs, func(a netip.Addr) bool { return Of(a) == IPv4 })
	v6 := slices.ContainsFunc(addrs, func(a netip.Addr) bool { return Of(a) == IPv6 })
	switch {
	case v4 && v6:
		return Dual
	case v6:
		return IPv6
	}
	return IPv4
}

// OfString is the address family of an address written as text (an
// engine's target): IPv6 when it has a colon.
func OfString(addr string) Family {
	if strings.Contains(addr, ":") {
		return IPv6
	}
	return IPv4
}

// String, Set and Type make *Family a command-line flag value (pflag.Value):
// a bad family is refused where the flag is parsed.
func (f *Family) String() string { return string(f.Or()) }

// Set parses s into f.
func (f *Family) Set(s string) error {
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*f = v
	return nil
}

// Type names the flag's value in --help.
func (f *Family) Type() string { return "family" }

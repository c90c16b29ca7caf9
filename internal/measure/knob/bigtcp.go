package knob

import (
	"fmt"
	"strconv"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/results"
)

// The GSO and GRO sizes' limits.
const (
	// MaxGSO is GSO_MAX_SIZE since Linux 6.3 (8 x 65535): BIG TCP's ceiling.
	MaxGSO = 524280
	// LegacyGSO is the largest GSO/GRO packet without BIG TCP (GSO_LEGACY_MAX_SIZE).
	LegacyGSO = 65536
)

// maxSizeKnob is knob name (gso, gro): every link's name_max_size and
// name_ipv4_max_size, set with set and set4, read with get.
func maxSizeKnob(name Name, order int, help string, set, set4 func(netlink.Link, int) error, get func(*netlink.LinkAttrs) (size, size4 uint32)) Knob {
	return Knob{Name: name, Scope: Lab, order: order, Whole: true, Example: "65536",
		canonical: intIn(name, 1, MaxGSO, "GSO_MAX_SIZE"), Help: help,
		Applier: maxSize{name: name, what: string(name) + "_max_size", what4: string(name) + "_ipv4_max_size", set: set, set4: set4, get: get}}
}

// maxSize is a knob setting a link's largest GSO or GRO packet: the size
// (what), its IPv4 twin (Linux 6.3+), how each is set and read.
type maxSize struct {
	name        Name
	what, what4 string
	set, set4   func(netlink.Link, int) error
	get         func(*netlink.LinkAttrs) (size, size4 uint32)
}

func (m maxSize) Set(p Path, v string) error {
	n := Int(v)
	return p.eachLink(func(_ link, lk netlink.Link) error {
		for _, s := range []struct {
			what string
			set  func(netlink.Link, int) error
		}{{m.what, m.set}, {m.what4, m.set4}} {
			if err := s.set(lk, n); err != nil {
				return fmt.Errorf("%s %d refused: %w", s.what, n, err)
			}
		}
		return nil
	})
}

// Read reads both sizes of every link: got is the larger (the IPv4 one
// is 0 on a kernel without it).
func (m maxSize) Read(p Path, v string) ([]results.KnobProof, error) {
	return p.readLinks(m.name, v, func(_ link, lk netlink.Link) (string, string, error) {
		size, size4 := m.get(lk.Attrs())
		got := strconv.Itoa(int(max(size, size4)))
		if v == "" {
			return got, "", nil
		}
		for _, c := range []struct {
			what string
			got  uint32
		}{{m.what, size}, {m.what4, size4}} {
			if int(c.got) != Int(v) {
				return got, fmt.Sprintf("%s is %d, not %s (the kernel ignored it)", c.what, c.got, v), nil
			}
		}
		return got, "", nil
	})
}

package knob

import "github.com/vishvananda/netlink"

// GRO is gro_max_size (and gro_ipv4_max_size) of every link on the path.
const GRO Name = "gro"

func init() {
	register(Knob{Name: GRO, Scope: Lab, order: 50, Whole: true, Example: "65536",
		canonical: intIn(GRO, 1, MaxGSO, "GSO_MAX_SIZE"),
		Help:      "gro_max_size (and gro_ipv4_max_size) of every link on the path; 0: the kernel's",
		Applier: maxSize{name: GRO, what: "gro_max_size", what4: "gro_ipv4_max_size",
			set: netlink.LinkSetGROMaxSize, set4: netlink.LinkSetGROIPv4MaxSize,
			get: func(a *netlink.LinkAttrs) (uint32, uint32) { return a.GROMaxSize, a.GROIPv4MaxSize }}})
}

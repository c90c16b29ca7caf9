package knob

import "github.com/vishvananda/netlink"

// GSO is gso_max_size (and gso_ipv4_max_size) of every link on the path.
const GSO Name = "gso"

func init() {
	register(Knob{Name: GSO, Scope: Lab, order: 40, Whole: true, Example: "65536",
		canonical: intIn(GSO, 1, MaxGSO, "GSO_MAX_SIZE"),
		Help:      "gso_max_size (and gso_ipv4_max_size) of every link on the path; above 65536 is BIG TCP; 0: the kernel's",
		Applier: maxSize{name: GSO, what: "gso_max_size", what4: "gso_ipv4_max_size",
			set: netlink.LinkSetGSOMaxSize, set4: netlink.LinkSetGSOIPv4MaxSize,
			get: func(a *netlink.LinkAttrs) (uint32, uint32) { return a.GSOMaxSize, a.GSOIPv4MaxSize }}})
}

package knob

import "github.com/vishvananda/netlink"

// GRO is gro_max_size (and gro_ipv4_max_size) of every link on the path.
const GRO Name = "gro"

func init() {
	register(maxSizeKnob(GRO, 50, "gro_max_size (and gro_ipv4_max_size) of every link on the path; 0: the kernel's",
		netlink.LinkSetGROMaxSize, netlink.LinkSetGROIPv4MaxSize,
		func(a *netlink.LinkAttrs) (uint32, uint32) { return a.GROMaxSize, a.GROIPv4MaxSize }))
}

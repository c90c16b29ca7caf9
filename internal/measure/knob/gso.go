package knob

import "github.com/vishvananda/netlink"

// GSO is gso_max_size (and gso_ipv4_max_size) of every link on the path.
const GSO Name = "gso"

func init() {
	register(maxSizeKnob(GSO, 40, "gso_max_size (and gso_ipv4_max_size) of every link on the path; above 65536 is BIG TCP; 0: the kernel's",
		netlink.LinkSetGSOMaxSize, netlink.LinkSetGSOIPv4MaxSize,
		func(a *netlink.LinkAttrs) (uint32, uint32) { return a.GSOMaxSize, a.GSOIPv4MaxSize }))
}

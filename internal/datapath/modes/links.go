package modes

// Links says what the knobs that set every link of a lab's path (mtu,
// gso, gro, offload; internal/measure/knob) must respect in a mode. The zero
// value: the kernel's limits, no tunnel.
type Links struct {
	// Tunnel is the encapsulation's overhead in bytes: the links behind
	// it (pods, their node ends, bridges, the tunnel device) get the MTU
	// less this, the underlay the MTU itself, as CNIs size a VXLAN overlay.
	Tunnel int
	// MaxMTU is the largest MTU the mode's data path carries (0: the
	// kernel's limits), and MaxMTUWhy why.
	MaxMTU    int
	MaxMTUWhy string
}

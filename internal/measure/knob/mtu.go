package knob

import (
	"fmt"
	"strconv"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/results"
)

// MTU is the MTU of every link on the path.
const MTU Name = "mtu"

// The MTU's limits.
const (
	MinMTU = 68    // IPv4's minimum (RFC 791)
	MaxMTU = 65535 // ETH_MAX_MTU: no Linux link takes more
)

func init() {
	register(Knob{Name: MTU, Scope: Lab, order: 30, Whole: true, Example: "1500", Applier: mtu{},
		canonical: intIn(MTU, MinMTU, MaxMTU, "the largest MTU Linux allows (ETH_MAX_MTU)"),
		Help:      "MTU of every link on the path (tunnels: the inner links get it minus the overhead); 0: the mode's own"})
}

// mtu sets every link's MTU; behind a tunnel, every link but the
// underlay's gets the MTU less the tunnel's overhead.
type mtu struct{}

// want is the MTU link l takes for the asked v.
func (mtu) want(p Path, l link, v int) int {
	if p.Tunnel > 0 && !l.underlay {
		return v - p.Tunnel
	}
	return v
}

func (m mtu) Set(p Path, v string) error {
	n := Int(v)
	if p.MaxMTU > 0 && n-p.Tunnel > p.MaxMTU {
		return fmt.Errorf("mtu %d: %s", n, p.MaxMTUWhy)
	}
	return p.eachLink(func(l link, lk netlink.Link) error {
		if err := netlink.LinkSetMTU(lk, m.want(p, l, n)); err != nil {
			return fmt.Errorf("mtu %d refused: %w", m.want(p, l, n), err)
		}
		return nil
	})
}

func (m mtu) Read(p Path, v string) ([]results.KnobProof, error) {
	return p.readLinks(MTU, v, func(l link, lk netlink.Link) (string, string, error) {
		got := lk.Attrs().MTU
		if v == "" {
			return strconv.Itoa(got), "", nil
		}
		if want := m.want(p, l, Int(v)); got != want {
			return strconv.Itoa(got), fmt.Sprintf("mtu is %d, not %d: the kernel or the mode's daemon kept another value", got, want), nil
		}
		return strconv.Itoa(got), "", nil
	})
}

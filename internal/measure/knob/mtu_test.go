package knob_test

import (
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// mtu sets every link of the lab, and is refused where the mode's data
// path carries less.
func TestMTUInLab(t *testing.T) {
	p := labPath(t, "kn-mtu", vethRouted)
	allGot(t, apply(t, p, "mtu=9000", knob.MTU, ""), "9000")
	p.MaxMTU, p.MaxMTUWhy = 4000, "the mode's switch copies at most 4000 bytes"
	apply(t, p, "mtu=4500", knob.MTU, "mtu 4500: the mode's switch copies at most 4000 bytes")
}

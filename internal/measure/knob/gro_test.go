package knob_test

import (
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// gro sets gro_max_size and its IPv4 twin of every link.
func TestGROInLab(t *testing.T) {
	p := labPath(t, "kn-gro", vethRouted)
	allGot(t, apply(t, p, "gro=32768", knob.GRO, ""), "32768")
}

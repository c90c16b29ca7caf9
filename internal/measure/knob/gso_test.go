package knob_test

import (
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// gso sets gso_max_size and its IPv4 twin of every link.
func TestGSOInLab(t *testing.T) {
	p := labPath(t, "kn-gso", vethRouted)
	allGot(t, apply(t, p, "gso=32768", knob.GSO, ""), "32768")
}

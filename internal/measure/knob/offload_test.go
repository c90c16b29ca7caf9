package knob_test

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/results"
)

// offload turns features off on every link and reads each back; a
// feature the device cannot change (loopback's rx checksum, in host
// mode) is not applied, saying so.
func TestOffloadInLab(t *testing.T) {
	p := labPath(t, "kn-off", vethRouted)
	for _, f := range apply(t, p, "offload=gro:off+tso:off", knob.Offload, "") {
		st := results.ParseFeatureStates(f.Got)
		if !strings.HasPrefix(st["gro"], "off") || !strings.HasPrefix(st["tso"], "off") || f.NotApplied != "" {
			t.Errorf("%s: %q (not applied %q)", f.Where, f.Got, f.NotApplied)
		}
	}
	host := labPath(t, "kn-offh", hostMode)
	apply(t, host, "offload=rx:off", knob.Offload, "rx stays on, not off (the device cannot change it)")
}

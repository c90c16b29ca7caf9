package bench

import (
	"strings"
	"testing"
	"time"
)

// --probe-conntrack-timeout: whole seconds above --probe-timeout, or 0
// (the kernel's); anything else is refused in one line naming the flag.
func TestConvergeFlowTimeoutFlag(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		want    string
	}{
		{0, ""},
		{time.Second, ""},
		{30 * time.Second, ""},
		{1500 * time.Millisecond, "--probe-conntrack-timeout 1.5s: use whole seconds"},
		{-time.Second, "--probe-conntrack-timeout -1s: use whole seconds"},
		{100 * time.Millisecond, "--probe-conntrack-timeout 100ms: use whole seconds"},
	} {
		s := DefaultConvergeSpec()
		s.Local, s.FlowTimeout = "k", c.timeout
		err := s.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("--probe-conntrack-timeout %s: %v; want %q", c.timeout, err, c.want)
		}
	}
	s := DefaultConvergeSpec()
	s.Local, s.ProbeTimeout = "k", 2*time.Second
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "use more than --probe-timeout (2s)") {
		t.Errorf("a flows' timeout of 1 s with probes waited for 2 s: %v", err)
	}
	if d := DefaultConvergeSpec(); d.FlowTimeout != time.Second {
		t.Errorf("the default flows' timeout is %s, want 1s", d.FlowTimeout)
	}
}

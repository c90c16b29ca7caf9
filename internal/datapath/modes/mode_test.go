package modes_test

import (
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
)

func build(*modes.Env) error { return nil }

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

func TestRegisterRefuses(t *testing.T) {
	mustPanic(t, "a second bridge", func() { modes.Register(modes.Mode{Name: modes.Bridge, Summary: "again", Build: build}) })
	mustPanic(t, "no build", func() { modes.Register(modes.Mode{Name: "test-nobuild", Summary: "x"}) })
	mustPanic(t, "no name", func() { modes.Register(modes.Mode{Summary: "x", Build: build}) })
	if _, err := modes.Get("test-nobuild"); err == nil {
		t.Error("a refused mode was registered")
	}
}

// TestModesDescribeThemselves: every descriptor is whole and consistent.
func TestModesDescribeThemselves(t *testing.T) {
	if len(modes.All()) != len(modes.Names()) || len(modes.All()) < 14 {
		t.Fatalf("%d modes registered", len(modes.All()))
	}
	for _, m := range modes.All() {
		if len(m.Seeds) == 0 || m.Build == nil || m.Summary == "" {
			t.Errorf("%s: seed, build or summary missing", m.Name)
		}
		if !m.Podless && m.MinPods < modes.DefaultMinPods {
			t.Errorf("%s: needs %d pods, but a test has a server and a client", m.Name, m.MinPods)
		}
		if m.MinNodes > 1 && !m.CrossHost {
			t.Errorf("%s needs %d nodes but is not cross-host", m.Name, m.MinNodes)
		}
		s := m.Services
		if m.OwnsDataPlane() && (s.EBPF == modes.EBPFNotWired || s.NoNetfilter == "" || m.Usable == nil) {
			t.Errorf("%s owns its data plane: it must say where it attaches, why netfilter cannot serve it, and probe the kernel", m.Name)
		}
		if m.Podless && (s.Reach != modes.ReachNotWired || s.EBPF != modes.EBPFNotWired) {
			t.Errorf("%s has no pods, yet says Services reach them", m.Name)
		}
		for _, o := range m.Options {
			if o.Check != nil {
				if err := o.Check(o.Default); err != nil {
					t.Errorf("%s: option %s: its default fails its check: %v", m.Name, o.Name, err)
				}
			}
		}
	}
	if got := strings.Join(modes.CrossHostModes(), ","); !strings.Contains(got, modes.Vxlan) || strings.Contains(got, modes.Macvlan+",") {
		t.Errorf("cross-host modes: %s", got)
	}
}

func TestBridgeNetfilterCaveat(t *testing.T) {
	m, _ := modes.Get(modes.Bridge)
	for v, want := range map[string]bool{"off": true, "0": true, "no": true, "": false, "on": false} {
		if got := m.Services.NetfilterCaveat(map[string]string{"bridge_nf_call_iptables": v}) != ""; got != want {
			t.Errorf("bridge_nf_call_iptables=%q: caveat %v, want %v", v, got, want)
		}
	}
}

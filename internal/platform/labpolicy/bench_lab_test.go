package labpolicy

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/testnet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// The policies knob's proof on a real dual-stack lab, for every provider:
// the generated set loaded, its objects read back equal to the compiled
// ones, a connection to DeniedPort dropped and counted by the provider, an
// allowed connection counted as evaluated; after the provider's objects
// are removed behind its back, the proof fails, naming the count.
func TestCellProofInLabs(t *testing.T) {
	requireRoot(t)
	const port = 7001
	labs := labsFor(t, "np-proof", family.Dual, func(st *lab.State) {
		testnet.Serve(t, st.Pods[0].NS, port, "")
		testnet.Serve6(t, st.Pods[0].NS, port, "")
	})
	for _, provider := range Names() {
		t.Run(provider, func(t *testing.T) {
			st := labs(provider)
			t.Cleanup(func() {
				if err := Clear(st.Name); err != nil {
					t.Error(err)
				}
			})
			c, err := Setup(st, provider, BenchSet{Policies: 60, IPBlocks: 30, Server: st.Pods[0], Clients: st.Pods[1:2], Ports: []uint16{port}})
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Policies) != 62 || !c.Installed {
				t.Fatalf("%d policies, installed %v", len(c.Policies), c.Installed)
			}
			for _, addr := range []string{st.Pods[0].IP, st.Pods[0].IP6} {
				cp := &CellProof{Lab: st, Provider: provider, ClientNS: st.Pods[1].NS, Server: netip.MustParseAddr(addr)}
				if why := cp.Begin(); why != "" {
					t.Fatalf("%s: %s", addr, why)
				}
				// Each family's 60 + 30 generated blocks are a rule at least.
				if cp.Objects != cp.Want || cp.Want < 2*90 || cp.ProbeDenied == 0 || !strings.HasSuffix(cp.Probe, ": dropped") {
					t.Errorf("%s: %+v", addr, cp)
				}
				ok, err := connects(st.Pods[1].NS, addr, netpol.TCP, port)
				if err != nil || !ok {
					t.Fatalf("%s: the allowed flow did not connect (%v)", addr, err)
				}
				if why := cp.End(); why != "" || cp.Evaluated == 0 {
					t.Errorf("%s: %s (%d evaluated)", addr, why, cp.Evaluated)
				}
			}
			p, _ := Get(provider)
			if err := p.Remove(st); err != nil {
				t.Fatal(err)
			}
			cp := &CellProof{Lab: st, Provider: provider, ClientNS: st.Pods[1].NS, Server: netip.MustParseAddr(st.Pods[0].IP)}
			if why := cp.Begin(); !strings.Contains(why, "policy provider "+provider) {
				t.Errorf("with the provider's objects gone: %q", why)
			}
		})
	}
}

// policy converge on a real lab, for every provider, with generated
// policies present: every change applied on the prober within the change
// timeout, both kinds, and the lab without policies afterwards.
func TestConvergeInLab(t *testing.T) {
	requireRoot(t)
	if os.Getenv("VNETLAB_BIN") == "" {
		t.Skip("policy converge runs vnetlab whoami and vnetlab kube probe in the pods: set VNETLAB_BIN (make test does)")
	}
	labs := labsFor(t, "np-conv", family.IPv4, nil)
	for _, provider := range Names() {
		t.Run(provider, func(t *testing.T) {
			st := labs(provider)
			pace := converge.DefaultPace()
			pace.Changes, pace.ChangeTimeout, pace.WarmUpTimeout = 8, 5*time.Second, 30*time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, err := Converge(ctx, ConvergeSpec{Lab: st.Name, Provider: provider, Policies: 100, Pace: pace}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			prober := st.Pods[1].Name
			kinds := map[string]int{}
			for _, ch := range c.Changes {
				kinds[ch.Kind]++
				if us, ok := ch.LatencyUS[prober]; !ok || us < 0 || us > pace.ChangeTimeout.Microseconds() {
					t.Errorf("change %d (%s): latency %d µs (applied %v)", ch.Seq, ch.Kind, us, ok)
				}
			}
			if kinds[KindAllowAdded] != 4 || kinds[KindAllowDeleted] != 4 || c.PolicyProvider != provider || c.Policies != 100 {
				t.Errorf("changes %v, provider %q, %d policies", kinds, c.PolicyProvider, c.Policies)
			}
			for _, ch := range c.Changes {
				t.Logf("change %d (%s): %.1f ms", ch.Seq, ch.Kind, float64(ch.LatencyUS[prober])/1000)
			}
			if o := c.OtherWork; o == nil || len(o.Samples) == 0 || slices.ContainsFunc(o.Top, func(n converge.NamedCPU) bool { return n.Name == "vnetlab" }) {
				t.Errorf("the machine's other work beside the changes: %+v (measured, without vnetlab's probers)", o)
			}
			cfg, err := Load(st.Name)
			if err != nil || cfg.Installed || len(cfg.Policies) > 0 {
				t.Errorf("after converge: %v, installed %v, %d policies", err, cfg.Installed, len(cfg.Policies))
			}
		})
	}
}

// labsFor gives each provider a lab (two pods, family fam) of the first
// mode it can serve among veth-routed and veth-ebpf (an eBPF provider on
// the pods' interfaces may serve only the latter), one lab per mode, up
// until the test ends; ready runs once in each.
func labsFor(t *testing.T, name string, fam family.Family, ready func(st *lab.State)) func(provider string) *lab.State {
	byMode := map[string]*lab.State{}
	return func(provider string) *lab.State {
		t.Helper()
		p, err := Get(provider)
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range []string{modes.VethRouted, modes.VethEBPF} {
			m, err := modes.Get(mode)
			if err != nil || p.Supports(m, nil) != "" {
				continue
			}
			if st := byMode[mode]; st != nil {
				return st
			}
			spec := lab.Spec{Name: name + "-" + mode[len(mode)-1:], Mode: mode, PodCIDR: lab.DefaultPodCIDR, Family: fam}
			if fam.HasIPv6() {
				spec.PodCIDR6 = lab.DefaultPodCIDR6
			}
			l, _ := testnet.UpLab(t, spec, 2)
			l.Release()
			if ready != nil {
				ready(l.State)
			}
			byMode[mode] = l.State
			return l.State
		}
		t.Fatalf("policy provider %s serves neither veth-routed nor veth-ebpf", provider)
		return nil
	}
}

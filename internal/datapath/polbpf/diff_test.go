package polbpf

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
)

// The differential: random worlds (netpoltest), each compiled and loaded
// into one plane after the other (so every load also edits what the one
// before wrote), and random probes through the programs as the enforcer is
// deployed, each verdict held to the reference model, World.Allowed, and
// the reply of each allowed one sent back.
//
// VNETLAB_DIFF_WORLDS and VNETLAB_DIFF_PROBES (per world) scale it up;
// VNETLAB_DIFF_SEED is the first world's seed: a disagreement names the
// seed, and that seed with VNETLAB_DIFF_WORLDS=1 runs its world alone.

// The default run: a few seconds.
const (
	diffWorlds = 300
	diffProbes = 200
)

func TestDifferential(t *testing.T) {
	worlds, probes, first := envInt(t, "VNETLAB_DIFF_WORLDS", diffWorlds), envInt(t, "VNETLAB_DIFF_PROBES", diffProbes), envInt(t, "VNETLAB_DIFF_SEED", 1)
	p := testPlane(t)
	start := time.Now()
	var n, allowed, bad int
	kinds := map[string]int{}
	for seed := first; seed < first+worlds; seed++ {
		g := netpoltest.New(uint64(seed))
		r := netpol.Compile(g.World)
		if _, err := p.Load(&r); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, g)
		}
		for _, pr := range g.Probes(probes) {
			want := g.World.Allowed(pr.Src, pr.Dst, pr.Proto, pr.Port)
			got := enforced(t, p, g.World, pr)
			n++
			kinds[pr.Kind(g.World)]++ // which programs it goes through
			if want {
				allowed++
			}
			what := ""
			switch {
			case got != want:
				what = fmt.Sprintf("the enforcer says %s, the model %s", netpoltest.Verdict(got), netpoltest.Verdict(want))
			case got && !replied(t, p, g.World, pr):
				what = "allowed by both, but its reply was dropped (the model passes every reply of an allowed connection)"
			}
			if what != "" {
				bad++
				t.Errorf("seed %d: probe %v: %s\n%s\nrun it alone: VNETLAB_DIFF_SEED=%d VNETLAB_DIFF_WORLDS=1 go test ./internal/datapath/polbpf -run TestDifferential",
					seed, pr, what, g, seed)
				if bad >= 5 {
					t.Fatalf("stopped at %d disagreements", bad)
				}
			}
		}
	}
	t.Logf("%d worlds from seed %d, %d probes (%d allowed, %d denied; %v), %d disagreements, in %v",
		worlds, first, n, allowed, n-allowed, kinds, bad, time.Since(start).Round(time.Millisecond))
	if n >= 1000 && (allowed < n/10 || n-allowed < n/10 || len(kinds) < 3) {
		t.Errorf("the probes hardly test anything: %d allowed, %d denied, %v", allowed, n-allowed, kinds)
	}
}

// enforced is the plane's verdict on a probe, as the programs are
// deployed: a packet between two pods leaves through the source's
// pol_egress and arrives through the destination's pol_ingress; from an
// address of no pod only the destination's pol_ingress sees it, to one
// only the source's pol_egress. The source port is 0, which no probe has
// as its destination: an earlier probe's reply entry (which outlives a
// new load, as a reply of a flow decided before must) can never match a
// later probe; each probe is a new flow.
func enforced(t *testing.T, p *Plane, w *netpol.World, pr netpoltest.Probe) bool {
	t.Helper()
	f := frame{src: pr.Src, dst: pr.Dst, proto: pr.Proto.Number(), dport: pr.Port}
	if w.PodAt(pr.Src) != nil && run(t, p, true, f) != tcActUnspec {
		return false
	}
	return w.PodAt(pr.Dst) == nil || run(t, p, false, f) == tcActUnspec
}

// replied says whether the reply of an allowed probe passes: from the
// destination's port back to source port 0, through the destination's
// pol_egress and the source's pol_ingress.
func replied(t *testing.T, p *Plane, w *netpol.World, pr netpoltest.Probe) bool {
	t.Helper()
	f := frame{src: pr.Dst, dst: pr.Src, proto: pr.Proto.Number(), sport: pr.Port}
	if w.PodAt(pr.Dst) != nil && run(t, p, true, f) != tcActUnspec {
		return false
	}
	return w.PodAt(pr.Src) == nil || run(t, p, false, f) == tcActUnspec
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		t.Fatalf("%s=%q: give a whole number", name, s)
	}
	return v
}

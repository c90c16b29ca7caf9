package labservice

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
)

// svc converge on a real lab, per provider: every change of each kind is
// applied on the prober pod, each within the change timeout of its write
// (a lab's write is synchronous: its latency is the transaction's and a
// probe interval), and the Service is gone afterwards.
func TestFloorConverges(t *testing.T) {
	requireRoot(t)
	if os.Getenv("VNETLAB_BIN") == "" {
		t.Skip("svc converge runs vnetlab whoami and vnetlab kube probe in the pods: set VNETLAB_BIN (make test does)")
	}
	for _, p := range []string{IPTables, NFTables, EBPF} {
		t.Run(p, func(t *testing.T) {
			st := newLab(t, "svfl"+p[:2], "veth-routed", 3, nil)
			pace := converge.DefaultPace()
			pace.Changes, pace.ChangeTimeout, pace.WarmUpTimeout = 10, 5*time.Second, 30*time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c, err := Floor(ctx, FloorSpec{Lab: st.Name, Provider: p, Pace: pace}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			prober := st.Pods[2].Name
			for _, ch := range c.Changes {
				us, ok := ch.LatencyUS[prober]
				if !ok || us < 0 || us > pace.ChangeTimeout.Microseconds() {
					t.Errorf("change %d (%s): latency %d µs (applied %v) on %s", ch.Seq, ch.Kind, us, ok, prober)
				}
			}
			if len(c.Changes) != 10 || c.Proxy != "lab provider "+p {
				t.Errorf("%d changes, proxy %q", len(c.Changes), c.Proxy)
			}
			for _, r := range c.Rows {
				t.Logf("%s %s: p50 %.1f ms, max %.1f ms", r.Kind, r.Node, r.P50.Value/1000, r.MaxUS/1000)
			}
			cfg, err := Load(st.Name)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Find(Key{VIP: DefaultFloorVIP, Port: floorPort, Proto: "udp"}) >= 0 {
				t.Error("the changed Service is still in the lab")
			}
		})
	}
}

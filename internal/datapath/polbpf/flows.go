package polbpf

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// FlowLifetimes are how long the programs keep a flow's entries (its own
// and its reply's) after the last packet that used them: an older entry is
// as if absent, and the flow's next packet is decided again. The nftables
// and iptables providers pass replies by conntrack's state, which ages
// the same way.
type FlowLifetimes struct {
	TCP   time.Duration
	Other time.Duration // UDP, SCTP and every other protocol
}

// DefaultFlowLifetimes are conntrack's defaults: an established TCP
// connection's (nf_conntrack_tcp_timeout_established, 5 days) and a UDP
// flow's (nf_conntrack_udp_timeout, 30 s).
var DefaultFlowLifetimes = FlowLifetimes{TCP: 5 * 24 * time.Hour, Other: 30 * time.Second}

// flowTouch is how stale an entry's last-seen time may grow before a
// packet writes it again; a lifetime must be at least twice it.
const flowTouch = time.Second

// setFlowLifetimes writes l into the programs' constants, in the kernel's
// jiffies, before they load.
func (p *Plane) setFlowLifetimes(l FlowLifetimes) error {
	if min(l.TCP, l.Other) < 2*flowTouch {
		return fmt.Errorf("policy flow lifetimes %+v: use %s or more (a busy flow's entry is refreshed every %s)", l, 2*flowTouch, flowTouch)
	}
	hz, err := kernelHZ()
	if err != nil {
		return err
	}
	for name, d := range map[string]time.Duration{policyVarPolFlowLifeTcp: l.TCP, policyVarPolFlowLifeOther: l.Other, policyVarPolFlowTouch: flowTouch} {
		if err := p.spec.Variables[name].Set(uint64(d.Seconds() * hz)); err != nil {
			return fmt.Errorf("policy programs: %s: %w", name, err)
		}
	}
	return nil
}

// kernelHZ is the kernel's tick rate (CONFIG_HZ, the rate of the jiffies
// the programs' clock counts), measured once per process.
var kernelHZ = sync.OnceValues(measureHZ)

// hzChoices are the rates the kernel's configuration offers.
var hzChoices = []float64{100, 250, 300, 1000}

// measureHZ counts the jiffies that pass (bpf_jiffies64, read by a
// two-instruction program) over 100 ms of the monotonic clock, and rounds
// the rate to the nearest of hzChoices when it lies within 10% of it (else
// the rate measured; a lifetime is then as close as that).
func measureHZ() (float64, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:         ebpf.SocketFilter,
		Instructions: asm.Instructions{asm.FnJiffies64.Call(), asm.Return()},
		License:      "GPL",
	})
	if err != nil {
		return 0, fmt.Errorf("policy programs: reading the kernel's jiffies (bpf_jiffies64, Linux 5.5 or later): %w", err)
	}
	defer prog.Close()
	// jiffies reads them, with the monotonic clock's time halfway through.
	jiffies := func() (uint32, time.Time, error) {
		before := time.Now()
		j, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 14)})
		return j, before.Add(time.Since(before) / 2), err
	}
	j0, t0, err := jiffies()
	if err != nil {
		return 0, fmt.Errorf("policy programs: reading the kernel's jiffies: %w", err)
	}
	time.Sleep(100 * time.Millisecond)
	j1, t1, err := jiffies()
	if err != nil {
		return 0, fmt.Errorf("policy programs: reading the kernel's jiffies: %w", err)
	}
	hz := float64(j1-j0) / t1.Sub(t0).Seconds()
	if hz <= 0 {
		return 0, errors.New("policy programs: the kernel's jiffies did not advance in 100 ms")
	}
	for _, c := range hzChoices {
		if math.Abs(hz-c) < c/10 {
			return c, nil
		}
	}
	return hz, nil
}

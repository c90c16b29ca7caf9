package runner

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results"
)

// The knobs on real labs: each test sweeps them on its own
// labs (prefix stk) and asserts on what the kernel kept and what the
// packets and samples show.

const knobLabPrefix = "stk"

// knobSpec is a short run of mode over the pod path with sweep's axes.
func knobSpec(t *testing.T, mode string, tests []engine.Test, axes ...string) Spec {
	t.Helper()
	pods, err := lab.DefaultPodSpecs(lab.DefaultPods, lab.DefaultPodCIDR, 1)
	if err != nil {
		t.Fatal(err)
	}
	spec := DefaultSpec()
	spec.Modes = []ModeVariant{{Label: mode, Mode: mode}}
	spec.Tests = tests
	spec.Duration = 2 * time.Second
	spec.Repeat = 2
	spec.Pods = pods
	spec.LabPrefix = knobLabPrefix
	for _, a := range axes {
		ax, err := knob.ParseAxisFlag(a)
		if err != nil {
			t.Fatal(err)
		}
		spec.Sweep.Axes = append(spec.Sweep.Axes, ax)
	}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	return spec
}

func runKnobs(t *testing.T, spec Spec) *results.File {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := Run(ctx, spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// cellAt is the cell of test at point (as knob.Point.String spells it).
func cellAt(t *testing.T, f *results.File, test engine.Test, point string) *results.Cell {
	t.Helper()
	for _, c := range f.Cells {
		if c.Test == string(test) && c.Point == point {
			return c
		}
	}
	t.Fatalf("no %s cell at %q", test, point)
	return nil
}

// A sweep gives one cell per value; MTU 9000 is read back on every link
// of the path and the receiver's average packet exceeds 1500 bytes; with
// GRO off and the sender segmenting to the MTU (GSO and TSO off too: with
// TSO on, a veth hands its peer 64 KB packets whatever the receiver's GRO)
// the receiver's average stays at or below the 1500-byte MTU.
func TestKnobSweepMTUAndOffload(t *testing.T) {
	requireLabs(t, knobLabPrefix)
	const allOff = "gro:off+gso:off+tso:off"
	spec := knobSpec(t, "veth-routed", []engine.Test{engine.TCPStream}, "streams=1,2", "mtu=default,9000", "offload=default,"+allOff)
	f := runKnobs(t, spec)

	base := "streams=1,mtu=default,offload=default"
	points := []string{base, "streams=2,mtu=default,offload=default", "streams=1,mtu=9000,offload=default", "streams=1,mtu=default,offload=" + allOff}
	if len(f.Cells) != len(points) {
		t.Fatalf("%d cells, want one per point %v", len(f.Cells), points)
	}
	for _, p := range points {
		c := cellAt(t, f, engine.TCPStream, p)
		if c.NotApplied != "" || c.Valid != spec.Repeat || c.Median <= 0 {
			t.Errorf("%s: not applied %q, %d valid, median %g: want every sample valid", p, c.NotApplied, c.Valid, c.Median)
		}
		if len(linkProofs(c, knob.MTU)) == 0 || c.Packets == nil || c.Packets.Receiver == nil || c.Packets.Sender == nil {
			t.Fatalf("%s: no proof: knobs %+v packets %+v", p, c.Proofs, c.Packets)
		}
		// Counted in a sample of its own, outside the statistics.
		if ps := c.ProofSample; ps == nil || !ps.Valid || ps.Value <= 0 || ps.Round == "" || c.CountedInWindows() {
			t.Errorf("%s: packets not from a proof sample of their own: %+v", p, ps)
		}
	}

	jumbo := cellAt(t, f, engine.TCPStream, "streams=1,mtu=9000,offload=default")
	for _, l := range linkProofs(jumbo, knob.MTU) {
		if l.Got != "9000" || l.Wanted != "9000" {
			t.Errorf("mtu 9000: %s reads back mtu %s (wanted %q)", l.Where, l.Got, l.Wanted)
		}
	}
	if r := jumbo.Packets.Receiver; r.AvgBytes <= 1500 {
		t.Errorf("mtu 9000: the receiver's average packet is %.0f bytes, want above 1500 (%+v)", r.AvgBytes, r)
	}
	for _, l := range linkProofs(cellAt(t, f, engine.TCPStream, base), knob.MTU) {
		if l.Got != "1500" {
			t.Errorf("default: %s has mtu %s, want the mode's 1500", l.Where, l.Got)
		}
	}

	off := cellAt(t, f, engine.TCPStream, "streams=1,mtu=default,offload="+allOff)
	for _, l := range linkProofs(off, knob.Offload) {
		if gro := results.ParseFeatureStates(l.Got)["gro"]; !strings.HasPrefix(gro, "off") {
			t.Errorf("gro off: %s reads back gro %q", l.Where, gro)
		}
	}
	if r := off.Packets.Receiver; r.AvgBytes > 1500 || r.MaxBytes > 1500 {
		t.Errorf("gro off: the receiver's packets average %.0f bytes, largest %d: want at most the 1500-byte MTU (%+v)", r.AvgBytes, r.MaxBytes, r)
	}
	if r := cellAt(t, f, engine.TCPStream, base).Packets.Receiver; r.AvgBytes <= off.Packets.Receiver.AvgBytes {
		t.Errorf("default offloads: the receiver's average packet %.0f bytes is not above %.0f with them off", r.AvgBytes, off.Packets.Receiver.AvgBytes)
	}
}

// A knob the device refuses (loopback's receive checksum is fixed on)
// makes the cell "not applied" with the reason, in the JSON and the
// table, and the cell is not measured.
func TestKnobRefusedNotApplied(t *testing.T) {
	requireLabs(t, knobLabPrefix)
	spec := knobSpec(t, "host", []engine.Test{engine.TCPStream}, "offload=default,rx:off")
	f := runKnobs(t, spec)
	if len(f.Cells) != 2 {
		t.Fatalf("%d cells, want 2", len(f.Cells))
	}
	ok := cellAt(t, f, engine.TCPStream, "offload=default")
	if ok.NotApplied != "" || ok.Valid != spec.Repeat {
		t.Errorf("default: not applied %q, %d valid", ok.NotApplied, ok.Valid)
	}
	c := cellAt(t, f, engine.TCPStream, "offload=rx:off")
	if !strings.Contains(c.NotApplied, "lo") || !strings.Contains(c.NotApplied, "rx") {
		t.Fatalf("rx:off on loopback: not applied %q, want the link and the feature named", c.NotApplied)
	}
	if len(c.Samples) != 0 || c.Valid != 0 || c.Median != 0 {
		t.Errorf("a not-applied cell was measured: %d samples, median %g", len(c.Samples), c.Median)
	}
	var buf bytes.Buffer
	report.Table(&buf, f, false)
	if out := buf.String(); !strings.Contains(out, "not applied") {
		t.Errorf("the table does not say not applied:\n%s", out)
	}
}

// crossHost puts spec's labs on two nodes joined by an underlay shaped to
// rate: a path that takes less than the machine can send.
func crossHost(t *testing.T, spec Spec, rate string) Spec {
	t.Helper()
	pods, err := lab.DefaultPodSpecs(lab.DefaultPods, lab.DefaultPodCIDR, 2)
	if err != nil {
		t.Fatal(err)
	}
	spec.Nodes, spec.UnderlayRate, spec.Pods = 2, rate, pods
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	return spec
}

// udp_pps at a rate far above what a 10 Mbit/s underlay carries reports
// the datagrams received per second and the loss. The pods sit behind
// routing nodes (host-gw): the shaped underlay drops what it cannot carry,
// where a sender on the shaped link itself would only be slowed down.
func TestUDPPPSLoss(t *testing.T) {
	requireLabs(t, knobLabPrefix)
	spec := knobSpec(t, "host-gw", []engine.Test{engine.UDPPPS})
	spec.Rate = "200M"
	f := runKnobs(t, crossHost(t, spec, "10mbit"))
	c := cellAt(t, f, engine.UDPPPS, "")
	if c.Valid != spec.Repeat || c.Unit != "pkt/s" || c.Median <= 0 {
		t.Fatalf("udp_pps: %d valid, median %g %s", c.Valid, c.Median, c.Unit)
	}
	for i, s := range c.Samples {
		if s.LossPct < 50 {
			t.Errorf("sample %d: %.0f pkt/s with %.1f%% loss, want most datagrams lost above the underlay's rate", i+1, s.Value, s.LossPct)
		}
	}
}

// rr's latency while two streams saturate the same path exceeds its latency idle
// (flent's RRUL shape), and the load is a point of rr cells only. The path
// is saturated at a 50 Mbit/s underlay, whose queue the requests wait in.
// (On one host the streams are bound by CPU, not by a queue, and with rr
// pinned to one CPU the scheduler keeps them on the other: p99 barely moves.)
func TestLatencyUnderLoad(t *testing.T) {
	requireLabs(t, knobLabPrefix)
	spec := crossHost(t, knobSpec(t, "host-gw", []engine.Test{engine.TCPStream, engine.TCPRR}, "load=0,2"), "50mbit")
	f := runKnobs(t, spec)
	if len(f.Cells) != 3 {
		t.Fatalf("%d cells, want 3 (tcp_stream at load 0 only, tcp_rr at 0 and 2)", len(f.Cells))
	}
	idle, loaded := cellAt(t, f, engine.TCPRR, "load=0"), cellAt(t, f, engine.TCPRR, "load=2")
	// The probe is open-loop at LoadProbeRate, idle and loaded alike:
	// 10^4 latencies a 2 s sample, enough for a p99 in both cells,
	// each timed from its intended send time.
	for _, c := range []*results.Cell{idle, loaded} {
		if c.Valid != spec.Repeat || c.Latency["p99"] <= 0 {
			t.Fatalf("%s: %d valid, latency %v (too few: %v)", c.Point, c.Valid, c.Latency, c.LatencyTooFew)
		}
		for i, s := range c.Samples {
			if s.Schedule == nil || strconv.FormatFloat(s.Schedule.Offered, 'f', -1, 64) != LoadProbeRate || s.Schedule.Flows != LoadProbeFlows {
				t.Fatalf("%s sample %d: schedule %+v, want the probe's %s/s over %d flows", c.Point, i+1, s.Schedule, LoadProbeRate, LoadProbeFlows)
			}
		}
	}
	iv, lv := idle.Latency["p99"], loaded.Latency["p99"]
	if iv >= lv {
		t.Errorf("p99 idle %.1f us, under load %.1f us: want it inflated under load", iv, lv)
	}
	t.Logf("p99 idle %.1f us, under load %.1f us; loaded behind its schedule: %v", iv, lv, loaded.Samples[0].Schedule.Behind)
}

// A sweep of shares of the path's maximum: the path is measured
// closed-loop first (3 samples), each cell records what 100% was and
// offers its share of it, and at 10% the idle path answers every request
// on time within 1%. tcp_crr: its closed-loop maximum (~10k/s here) puts
// every share under the engine's 50000/s.
func TestKnobSweepRateShare(t *testing.T) {
	requireLabs(t, knobLabPrefix)
	spec := knobSpec(t, "veth-routed", []engine.Test{engine.TCPCRR}, "rate=10%,30%")
	f := runKnobs(t, spec)
	var max float64
	for _, share := range []float64{0.1, 0.3} {
		point := "rate=" + strconv.FormatFloat(100*share, 'f', -1, 64) + "%"
		c := cellAt(t, f, engine.TCPCRR, point)
		m := c.RateMax
		if m == nil || m.Error != "" || len(m.ClosedLoop) != calibrationSamples || m.Share != share || m.Max <= 0 {
			t.Fatalf("%s: rate max %+v, want %d closed-loop samples and share %g", point, m, calibrationSamples, share)
		}
		if max != 0 && m.Max != max {
			t.Errorf("%s: 100%% is %g, but %g at the other share: want one calibration per path", point, m.Max, max)
		}
		max = m.Max
		if m.Offered != math.Round(share*m.Max) {
			t.Errorf("%s: offered %g, want %g of %g", point, m.Offered, share, m.Max)
		}
		if c.Valid != spec.Repeat {
			t.Fatalf("%s: %d valid samples (%s), want %d", point, c.Valid, firstErr(c), spec.Repeat)
		}
		for i, s := range c.Samples {
			if s.Schedule == nil || s.Schedule.Offered != m.Offered {
				t.Fatalf("%s sample %d: schedule %+v, want %g/s offered", point, i+1, s.Schedule, m.Offered)
			}
			if share == 0.1 {
				checkKept(t, point, i, s, m.Offered)
			}
		}
		t.Logf("%s: 100%% = %.0f conn/s (closed loop %v), offered %g, achieved %v, p99 %.0f us", point, m.Max, m.ClosedLoop, m.Offered, c.Values(), c.Latency["p99"])
	}
}

// checkKept: open-loop sample i of point answered every request of its
// rate within 1% (the idle path keeps up), or it says it fell behind: a
// busy shared machine (CI's, the suite beside other work) may hold the
// pinned client off its CPU for milliseconds and leave a few requests late
// or unsent (seen: 2 of 2000 unsent, 750/s of 816 in a second sample), and
// then the sample must say so (Behind), with at most 10% missing.
func checkKept(t *testing.T, point string, i int, s results.Sample, rate float64) {
	t.Helper()
	kept := s.Schedule.Sent == s.Schedule.Scheduled && s.Value >= 0.99*rate && s.Value <= 1.01*rate
	if !kept && (!s.Schedule.Behind || s.Value < 0.9*rate || s.Value > 1.01*rate) {
		t.Errorf("%s sample %d: achieved %.1f/s, schedule %+v: want %g/s within 1%%, or behind its schedule (said) by 10%% at most", point, i+1, s.Value, s.Schedule, rate)
	}
}

// firstErr is a cell's first failed sample's error.
func firstErr(c *results.Cell) string {
	for _, s := range c.Samples {
		if s.Error != "" {
			return s.Error
		}
	}
	return ""
}

// A proof counts its own window only: a tcp_rr cell measured after a
// stream in the same lab reports the rr's packets, its largest packet
// far under the stream's (the counts start from zero at each proof).
func TestProofWindowIsItsOwn(t *testing.T) {
	requireLabs(t, knobLabPrefix)
	spec := knobSpec(t, "veth-routed", []engine.Test{engine.TCPStream, engine.TCPRR})
	spec.Repeat = 1
	f := runKnobs(t, spec)
	stream, rr := cellAt(t, f, engine.TCPStream, ""), cellAt(t, f, engine.TCPRR, "")
	for _, c := range []*results.Cell{stream, rr} {
		if c.Packets == nil || c.Packets.Sender == nil {
			t.Fatalf("%s: no sender in its proof: %+v", c.Test, c.Packets)
		}
	}
	if s := stream.Packets.Sender; s.MaxBytes <= 1500 {
		t.Errorf("tcp_stream: the sender's largest packet %d bytes, want a GSO packet above 1500", s.MaxBytes)
	}
	if s := rr.Packets.Sender; s.MaxBytes >= 1500 || s.AvgBytes >= 200 {
		t.Errorf("tcp_rr after tcp_stream: the sender's packets average %.0f bytes, largest %d: the stream's window leaked into the rr's proof", s.AvgBytes, s.MaxBytes)
	}
}

// A sweep of the rate on a real lab: a cell per value; the
// closed-loop cell (max) has no schedule, each open-loop cell's samples
// offer the point's rate and achieve it within 1% on the idle path, and
// the file records the sweep.
func TestKnobSweepRate(t *testing.T) {
	requireLabs(t, knobLabPrefix)
	spec := knobSpec(t, "veth-routed", []engine.Test{engine.TCPRR}, "rate=max,1000,3000")
	f := runKnobs(t, spec)
	if c := cellAt(t, f, engine.TCPRR, "rate=max"); c.Valid != spec.Repeat || c.Samples[0].Schedule != nil {
		t.Errorf("closed loop: %d valid, schedule %+v: want %d valid and none", c.Valid, c.Samples[0].Schedule, spec.Repeat)
	}
	for _, rate := range []float64{1000, 3000} {
		point := "rate=" + strconv.Itoa(int(rate))
		c := cellAt(t, f, engine.TCPRR, point)
		if c.Valid != spec.Repeat {
			t.Fatalf("%s: %d valid samples, want %d", point, c.Valid, spec.Repeat)
		}
		for i, s := range c.Samples {
			if s.Schedule == nil || s.Schedule.Offered != rate {
				t.Fatalf("%s sample %d: schedule %+v, want %g/s offered", point, i+1, s.Schedule, rate)
			}
			checkKept(t, point, i, s, rate)
		}
	}
	if sw := f.Metadata.Settings.Sweep; sw == nil || sw.Axes[0].Knobs[0] != "rate" {
		t.Errorf("the file's sweep: %+v", sw)
	}
}

// linkProofs are cell c's proofs of knob k on its links but loopback.
func linkProofs(c *results.Cell, k knob.Name) []results.KnobProof {
	var out []results.KnobProof
	for _, p := range c.Proofs {
		if p.Knob == string(k) && !strings.HasPrefix(p.Where, "lo (") {
			out = append(out, p)
		}
	}
	return out
}

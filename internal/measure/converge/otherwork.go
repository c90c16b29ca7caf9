package converge

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/results"
)

// OtherWorkEvery is the interval of the other work's samples: a reading
// takes about 30 µs per process on the machine, about 10 ms with a 2-node
// cluster up (OtherWork.ReadSeconds), 0.1% of a CPU at this interval.
const OtherWorkEvery = 10 * time.Second

// otherWorkTop is how many process names the result keeps.
const otherWorkTop = 3

// OtherMeter measures the machine's other work (cpu.OtherWorkOf) beside a
// run, phase by phase, and the changes phase in samples of OtherWorkEvery,
// which the file's analysis holds against the changes (analysis.Disturbed).
// It is not safe for concurrent use: kube converge's meter calls it under
// its own lock, a lab's run from Cycle's hooks.
type OtherMeter struct {
	measured    cpu.Measured // the measured system's processes, the tool's own
	first, last cpu.OtherWork
	samples     []OtherWorkSample
	reading     time.Duration // the phase's readings took
	res         OtherWork
}

// NewOtherMeter measures what is not m's.
func NewOtherMeter(m cpu.Measured) *OtherMeter {
	return &OtherMeter{measured: m, res: OtherWork{Phases: map[string]float64{}}}
}

// read is a reading now; when one fails (no /proc), the last one again,
// now: nothing is counted rather than a jump.
func (o *OtherMeter) read() cpu.OtherWork {
	t0 := time.Now()
	defer func() { o.reading += time.Since(t0) }()
	w, err := cpu.OtherWorkOf(o.measured)
	if err != nil {
		w = o.last
		w.At = time.Now()
	}
	return w
}

// Begin starts a phase.
func (o *OtherMeter) Begin() {
	o.reading = 0
	o.first = o.read()
	o.last, o.samples = o.first, nil
}

// Tick closes a sample when OtherWorkEvery has passed since the last one
// (call it often: every 0.5 s, or after each change).
func (o *OtherMeter) Tick(now time.Time) {
	if now.Sub(o.last.At) >= OtherWorkEvery {
		o.sample()
	}
}

// sample closes an interval.
func (o *OtherMeter) sample() {
	w := o.read()
	d, _ := w.Sub(o.last)
	o.samples = append(o.samples, OtherWorkSample{Start: o.last.At.UnixNano(), End: w.At.UnixNano(), CPUSeconds: d.Seconds()})
	o.last = w
}

// End ends a phase: the sum of its samples, and for the changes their
// samples and the busiest process names. The sum, not the phase's first
// reading to its last: a cluster's shim that starts after the first and
// ends before the last, under the machine's init, is taken out of the
// other work only by the sample across its end (cpu.OtherWork.Sub).
func (o *OtherMeter) End(phase string) {
	o.sample()
	_, byName := o.last.Sub(o.first)
	total := 0.0
	for _, s := range o.samples {
		total += s.CPUSeconds
	}
	o.res.Phases[phase] = total
	if phase != results.PhaseChanges {
		return
	}
	o.res.Samples, o.res.ReadSeconds, o.res.Top = o.samples, o.reading.Seconds(), nil
	for name, d := range byName {
		o.res.Top = append(o.res.Top, NamedCPU{Name: name, CPUSeconds: d.Seconds()})
	}
	slices.SortFunc(o.res.Top, func(a, b NamedCPU) int {
		return cmp.Or(cmp.Compare(b.CPUSeconds, a.CPUSeconds), strings.Compare(a.Name, b.Name))
	})
	o.res.Top = o.res.Top[:min(len(o.res.Top), otherWorkTop)]
}

// Result is what the ended phases measured.
func (o *OtherMeter) Result() *OtherWork { return &o.res }

// Hooks measure a lab's changes phase, where nothing else samples: it
// begins when Cycle's warm-up ends and is sampled after each change; End
// it with results.PhaseChanges once Cycle returns.
func (o *OtherMeter) Hooks() Hooks {
	return Hooks{
		WarmedUp: func(context.Context) { o.Begin() },
		Observed: func(context.Context, *Change) { o.Tick(time.Now()) },
	}
}

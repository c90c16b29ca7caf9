package bench

import (
	"cmp"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/results"
)

// otherWorkEvery is the interval of the other work's samples: a reading
// takes about 2 ms of CPU here (30 µs per process of the machine's
// namespace), 0.02% of a CPU at this interval.
const otherWorkEvery = 10 * time.Second

// otherWorkTop is how many process names the result keeps.
const otherWorkTop = 3

// otherMeter measures the machine's other work (cpu.OtherWorkOf) beside a
// local cluster's run, phase by phase, and the changes phase in samples.
// Its methods are called by usageMeter, under its lock.
type otherMeter struct {
	roots       []int // the cluster's processes and vnetlab's own
	first, last cpu.OtherWork
	samples     []results.OtherWorkSample
	res         results.OtherWork
}

func newOtherMeter(name string) *otherMeter {
	return &otherMeter{roots: append(cluster.Procs(name), os.Getpid()),
		res: results.OtherWork{Phases: map[string]float64{}}}
}

// read is a reading now; a failed one (no /proc) is the empty reading.
func (o *otherMeter) read() cpu.OtherWork {
	w, _ := cpu.OtherWorkOf(o.roots)
	return w
}

// begin starts a phase.
func (o *otherMeter) begin() {
	o.first = o.read()
	o.last, o.samples = o.first, nil
}

// sample closes an interval.
func (o *otherMeter) sample() {
	w := o.read()
	d, _ := w.Sub(o.last)
	o.samples = append(o.samples, results.OtherWorkSample{Start: o.last.At.UnixNano(), End: w.At.UnixNano(), CPUSeconds: d.Seconds()})
	o.last = w
}

// end ends a phase: its sum, and for the changes their samples and the
// busiest process names.
func (o *otherMeter) end(phase string) {
	o.sample()
	total, byName := o.last.Sub(o.first)
	o.res.Phases[phase] = total.Seconds()
	if phase != results.PhaseChanges {
		return
	}
	o.res.Samples, o.res.Top = o.samples, nil
	for name, d := range byName {
		o.res.Top = append(o.res.Top, results.NamedCPU{Name: name, CPUSeconds: d.Seconds()})
	}
	slices.SortFunc(o.res.Top, func(a, b results.NamedCPU) int {
		return cmp.Or(cmp.Compare(b.CPUSeconds, a.CPUSeconds), strings.Compare(a.Name, b.Name))
	})
	o.res.Top = o.res.Top[:min(len(o.res.Top), otherWorkTop)]
}

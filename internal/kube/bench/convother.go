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
// takes about 30 µs per process on the machine, about 10 ms with a 2-node
// cluster up (OtherWork.ReadSeconds), 0.1% of a CPU at this interval.
const otherWorkEvery = 10 * time.Second

// otherWorkTop is how many process names the result keeps.
const otherWorkTop = 3

// otherMeter measures the machine's other work (cpu.OtherWorkOf) beside a
// local cluster's run, phase by phase, and the changes phase in samples.
// Its methods are called by usageMeter, under its lock.
type otherMeter struct {
	measured    cpu.Measured // the cluster's processes and pods, vnetlab's own
	first, last cpu.OtherWork
	samples     []results.OtherWorkSample
	reading     time.Duration // the phase's readings took
	res         results.OtherWork
}

func newOtherMeter(name string) *otherMeter {
	m := cpu.Measured{Roots: append(cluster.Procs(name), os.Getpid())}
	if st, err := cluster.Load(name); err == nil {
		for _, n := range st.Nodes {
			m.Cgroups = append(m.Cgroups, cluster.NodeCgroupPath(n.Name))
		}
	}
	return &otherMeter{measured: m, res: results.OtherWork{Phases: map[string]float64{}}}
}

// read is a reading now; when one fails (no /proc), the last one again,
// now: nothing is counted rather than a jump.
func (o *otherMeter) read() cpu.OtherWork {
	t0 := time.Now()
	defer func() { o.reading += time.Since(t0) }()
	w, err := cpu.OtherWorkOf(o.measured)
	if err != nil {
		w = o.last
		w.At = time.Now()
	}
	return w
}

// begin starts a phase.
func (o *otherMeter) begin() {
	o.reading = 0
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
	o.res.Samples, o.res.ReadSeconds, o.res.Top = o.samples, o.reading.Seconds(), nil
	for name, d := range byName {
		o.res.Top = append(o.res.Top, results.NamedCPU{Name: name, CPUSeconds: d.Seconds()})
	}
	slices.SortFunc(o.res.Top, func(a, b results.NamedCPU) int {
		return cmp.Or(cmp.Compare(b.CPUSeconds, a.CPUSeconds), strings.Compare(a.Name, b.Name))
	})
	o.res.Top = o.res.Top[:min(len(o.res.Top), otherWorkTop)]
}

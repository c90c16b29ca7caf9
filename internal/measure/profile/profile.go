// Package profile finds where a data path spends its CPU: it samples every
// CPU's kernel stacks on a cpu-clock timer (an eBPF program on perf events,
// bpf/profile.c), counts data-path tracepoints, names the stacks from
// /proc/kallsyms, attributes each sample to a stage a network engineer
// recognises (rules in stages.rules), and writes the stacks as pprof
// profiles, folded stacks and SVG flame graphs.
package profile

import "sort"

// Frame names used besides kernel functions.
const (
	UserFrame = "[user]"  // the user-space part of a stack (not symbolised)
	IdleComm  = "swapper" // pid 0: the idle task
)

// Profile is what was sampled over one or more windows.
type Profile struct {
	Hz      int               `json:"hz"`   // samples per second per CPU
	CPUs    int               `json:"cpus"` // CPUs sampled
	WallSec float64           `json:"wall_s"`
	Stacks  []Stack           `json:"stacks"`
	Events  map[string]uint64 `json:"events"`
	Drops   map[string]uint64 `json:"drops,omitempty"` // by drop reason
	Lost    uint64            `json:"samples_lost,omitempty"`
}

// Stack is one distinct stack and how many samples hit it.
type Stack struct {
	Comm string `json:"comm"`
	// Lab: the task was in a network namespace other than the root one
	// (a lab's pod or node: the test's engines).
	Lab    bool     `json:"lab,omitempty"`
	Frames []string `json:"frames"` // root first; UserFrame first when the process was in or came from user space
	Count  uint64   `json:"count"`
}

// Kernel is the kernel part of the stack (after the user frame).
func (s Stack) Kernel() []string {
	if len(s.Frames) > 0 && s.Frames[0] == UserFrame {
		return s.Frames[1:]
	}
	return s.Frames
}

// Samples is the number of samples.
func (p *Profile) Samples() uint64 {
	var n uint64
	for _, s := range p.Stacks {
		n += s.Count
	}
	return n
}

// SampleSec is the CPU time one sample stands for.
func (p *Profile) SampleSec() float64 {
	if p.Hz == 0 {
		return 0
	}
	return 1 / float64(p.Hz)
}

// Add merges q into p (windows of one cell).
func (p *Profile) Add(q *Profile) {
	if p.Hz == 0 {
		p.Hz, p.CPUs = q.Hz, q.CPUs
	}
	if p.Events == nil {
		p.Events = map[string]uint64{}
	}
	if p.Drops == nil {
		p.Drops = map[string]uint64{}
	}
	p.WallSec += q.WallSec
	p.Lost += q.Lost
	for k, v := range q.Events {
		p.Events[k] += v
	}
	for k, v := range q.Drops {
		p.Drops[k] += v
	}
	p.Stacks = append(p.Stacks, q.Stacks...)
	p.Compact()
}

// Compact merges identical stacks and orders them by count, largest first.
func (p *Profile) Compact() {
	idx := map[string]int{}
	var out []Stack
	for _, s := range p.Stacks {
		k := stackKey(s)
		if i, ok := idx[k]; ok {
			out[i].Count += s.Count
			continue
		}
		idx[k] = len(out)
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	p.Stacks = out
}

// Process names the task: its comm, with LabSuffix when it ran in a lab.
func (s Stack) Process() string {
	if s.Lab {
		return s.Comm + LabSuffix
	}
	return s.Comm
}

// LabSuffix marks a process in a lab's namespace in folded stacks and
// flame graphs ("iperf3@lab").
const LabSuffix = "@lab"

func stackKey(s Stack) string {
	k := s.Process()
	for _, f := range s.Frames {
		k += ";" + f
	}
	return k
}

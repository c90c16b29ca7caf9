package profile

import (
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

// DefaultHz is the sampling rate per CPU: a prime, so that sampling does not
// beat with the kernel's periodic timers.
const DefaultHz = 997

// eventNames are the counters of bpf/profile.c's enum event, in its order.
var eventNames = []string{
	EventNetifRx, EventNetDevXmit, EventNapiPoll, EventFibLookup, EventFib6Lookup, EventDrop, eventSampleLost,
}

// Event names, as written in results (profile.events).
const (
	EventNetifRx    = "netif_rx"     // backlog enqueues (veth, tun, loopback, macvlan)
	EventNetDevXmit = "net_dev_xmit" // driver transmits: one per device a packet leaves
	EventNapiPoll   = "napi_poll"
	EventFibLookup  = "fib_table_lookup"
	EventFib6Lookup = "fib6_table_lookup" // IPv6's route lookups
	EventDrop       = "kfree_skb"         // packets dropped (any reason)
	eventSampleLost = "samples_lost"      // stack map collisions or full maps
)

// tracepoints are the programs counting data-path events; each names its
// tracepoint in its section (tp_btf/NAME) and attaches by that name.
func tracepoints(o *profileObjects) []*ebpf.Program {
	return []*ebpf.Program{o.TpNetifRx, o.TpNetDevXmit, o.TpNapiPoll, o.TpFibTableLookup, o.TpFib6TableLookup, o.TpKfreeSkb}
}

// Sampler samples every CPU's stacks on a cpu-clock timer and counts
// data-path tracepoints between Start and Stop. Everything it holds is a
// file descriptor of this process (perf events, programs, maps, tracepoint
// links, nothing pinned): if the process dies, even by kill -9,
// the kernel detaches it all.
type Sampler struct {
	objs   profileObjects
	perf   []int // one cpu-clock perf event per CPU, the BPF program attached
	links  []link.Link
	hz     int
	syms   *Kallsyms
	start  time.Time
	active bool
	// stacksOnly leaves the tracepoints out (the overhead benchmark's
	// split between sampling and counting).
	stacksOnly bool
}

// Open loads the programs and opens one disabled sampling event per CPU.
// hz <= 0 means DefaultHz.
func Open(hz int) (*Sampler, error) {
	if hz <= 0 {
		hz = DefaultHz
	}
	syms, err := LoadKallsyms()
	if err != nil {
		return nil, err
	}
	spec, err := loadProfile()
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return nil, err
	}
	if err := spec.Variables["root_netns_ino"].Set(uint32(st.Ino)); err != nil {
		return nil, err
	}
	s := &Sampler{hz: hz, syms: syms}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load the profiler's eBPF programs: %w", err)
	}
	cpus, err := onlineCPUs()
	if err != nil {
		s.Close()
		return nil, err
	}
	for _, c := range cpus {
		fd, err := openCPUClock(c, hz)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.perf = append(s.perf, fd)
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_BPF, s.objs.OnSample.FD()); err != nil {
			s.Close()
			return nil, fmt.Errorf("attach the sampling program to CPU %d: %w", c, err)
		}
	}
	// Attach and detach the tracepoints once: the library probes kernel
	// features on first use (loading test programs), which must not happen
	// inside the first measured window.
	if err := s.Start(); err != nil {
		s.Close()
		return nil, err
	}
	if _, err := s.Stop(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Hz is the sampling rate per CPU.
func (s *Sampler) Hz() int { return s.hz }

// SetLabNamespaces restricts what counts as the labs' to these network
// namespaces (inode numbers): packets on their devices, processes in them.
// None: every namespace but the root one.
func (s *Sampler) SetLabNamespaces(inodes []uint32) error {
	var (
		k    uint32
		keys []uint32
	)
	it := s.objs.LabNetns.Iterate()
	var v uint8
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	for _, k := range keys {
		_ = s.objs.LabNetns.Delete(k)
	}
	for _, ino := range inodes {
		if err := s.objs.LabNetns.Put(ino, uint8(1)); err != nil {
			return fmt.Errorf("profile: lab namespaces: %w", err)
		}
	}
	use := uint32(0)
	if len(inodes) > 0 {
		use = 1
	}
	return s.objs.Settings.Put(uint32(0), use)
}

// Symbols is the kernel symbol table the sampler resolves stacks with.
func (s *Sampler) Symbols() *Kallsyms { return s.syms }

func openCPUClock(cpu, hz int) (int, error) {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Sample: uint64(time.Second) / uint64(hz), // period in ns of CPU clock
		Bits:   unix.PerfBitDisabled,
	}
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("open a cpu-clock sampling event on CPU %d: %w (needs root and perf_event_paranoid <= 1 or CAP_PERFMON)", cpu, err)
	}
	return fd, nil
}

// onlineCPUs parses /sys/devices/system/cpu/online ("0-1,4").
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	return cpupin.ParseList(string(b))
}

// Start attaches the tracepoints and enables sampling.
func (s *Sampler) Start() error {
	if s.active {
		return errors.New("profile: Start called twice")
	}
	for _, prog := range tracepoints(&s.objs) {
		if s.stacksOnly {
			break
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			s.detach()
			return fmt.Errorf("attach tracepoint program %s: %w", prog, err)
		}
		s.links = append(s.links, l)
	}
	for _, fd := range s.perf {
		if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			s.detach()
			return fmt.Errorf("enable sampling: %w", err)
		}
	}
	s.start, s.active = time.Now(), true
	return nil
}

// detach stops sampling and removes the tracepoints.
func (s *Sampler) detach() {
	for _, fd := range s.perf {
		_ = unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
	for _, l := range s.links {
		l.Close()
	}
	s.links = nil
}

// Stop disables sampling, reads what was collected since Start, resolves it
// to symbols and empties the maps for the next window.
func (s *Sampler) Stop() (*Profile, error) {
	if !s.active {
		return nil, errors.New("profile: Stop without Start")
	}
	s.detach()
	s.active = false
	p := &Profile{Hz: s.hz, CPUs: len(s.perf), WallSec: time.Since(s.start).Seconds(),
		Events: map[string]uint64{}, Drops: map[string]uint64{}}
	if err := s.readSamples(p); err != nil {
		return nil, err
	}
	if err := s.readEvents(p); err != nil {
		return nil, err
	}
	return p, nil
}

func (s *Sampler) readSamples(p *Profile) error {
	frames := map[int32][]string{} // stack id -> names, root first
	stack := func(id int32, user bool) ([]string, error) {
		if id < 0 {
			return nil, nil
		}
		if f, ok := frames[id]; ok {
			return f, nil
		}
		var ips [127]uint64
		if err := s.objs.Stacks.Lookup(uint32(id), &ips); err != nil {
			return nil, fmt.Errorf("read stack %d: %w", id, err)
		}
		var f []string
		if user {
			f = []string{UserFrame} // user stacks are not symbolised (yet)
		} else {
			f = s.syms.Stack(ips[:])
		}
		frames[id] = f
		return f, nil
	}
	var (
		k     profileSampleKey
		n     uint64
		keys  []profileSampleKey
		agg   = map[string]*Stack{}
		order []string
	)
	it := s.objs.Samples.Iterate()
	for it.Next(&k, &n) {
		keys = append(keys, k)
		kf, err := stack(k.Kstack, false)
		if err != nil {
			return err
		}
		uf, err := stack(k.Ustack, true)
		if err != nil {
			return err
		}
		comm := unix.ByteSliceToString(toBytes(k.Comm[:]))
		if k.Pid == 0 {
			comm = IdleComm
		}
		all := append(append([]string{}, uf...), kf...)
		st := Stack{Comm: comm, Lab: k.Lab != 0, Frames: all, Count: n}
		key := stackKey(st)
		if a, ok := agg[key]; ok {
			a.Count += n
			continue
		}
		agg[key] = &st
		order = append(order, key)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read samples: %w", err)
	}
	for _, key := range order {
		p.Stacks = append(p.Stacks, *agg[key])
	}
	for i := range keys {
		_ = s.objs.Samples.Delete(&keys[i])
	}
	for id := range frames {
		_ = s.objs.Stacks.Delete(uint32(id))
	}
	return nil
}

func toBytes(c []int8) []byte {
	b := make([]byte, len(c))
	for i, v := range c {
		b[i] = byte(v)
	}
	return b
}

func (s *Sampler) readEvents(p *Profile) error {
	ncpu := ebpf.MustPossibleCPU()
	vals := make([]uint64, ncpu)
	zero := make([]uint64, ncpu)
	for i, name := range eventNames {
		if err := s.objs.Events.Lookup(uint32(i), &vals); err != nil {
			return fmt.Errorf("read event %s: %w", name, err)
		}
		var sum uint64
		for _, v := range vals {
			sum += v
		}
		if name == eventSampleLost {
			p.Lost = sum
		} else {
			p.Events[name] = sum
		}
		if err := s.objs.Events.Put(uint32(i), zero); err != nil {
			return err
		}
	}
	reasons := dropReasonNames()
	var (
		reason uint32
		keys   []uint32
	)
	it := s.objs.Drops.Iterate()
	for it.Next(&reason, &vals) {
		var sum uint64
		for _, v := range vals {
			sum += v
		}
		p.Drops[reasons.name(reason)] += sum
		keys = append(keys, reason)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read drops: %w", err)
	}
	for _, r := range keys {
		_ = s.objs.Drops.Delete(r)
	}
	return nil
}

// Close stops sampling and releases every program, map and event.
func (s *Sampler) Close() error {
	s.detach()
	for _, fd := range s.perf {
		unix.Close(fd)
	}
	s.perf = nil
	return s.objs.Close()
}

// Package engine runs one measurement between two namespaces. Each engine
// (iperf3, sockperf, the built-in rr engine) is a Driver in its own file.
package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Test names, with netperf's meaning.
type Test string

const (
	TCPStream Test = "tcp_stream" // bulk TCP, Gbit/s
	UDPStream Test = "udp_stream" // bulk UDP, Gbit/s received, with loss
	UDPPPS    Test = "udp_pps"    // small UDP datagrams: packets/s received, with loss
	TCPRR     Test = "tcp_rr"     // request/response on one connection, transactions/s
	UDPRR     Test = "udp_rr"     // request/response over UDP, transactions/s
	TCPCRR    Test = "tcp_crr"    // connect, request, response, close: connections/s
)

// RequestResponse reports whether t is a request/response test (rr, crr):
// the tests whose rate follows where the scheduler puts client and server.
func (t Test) RequestResponse() bool { return t == TCPRR || t == UDPRR || t == TCPCRR }

// AllTests in display order.
var AllTests = []Test{TCPStream, UDPStream, UDPPPS, TCPRR, UDPRR, TCPCRR}

// Unit returns the unit a test's value is reported in.
func (t Test) Unit() string {
	switch t {
	case TCPStream, UDPStream:
		return "Gbit/s"
	case UDPPPS:
		return "pkt/s"
	case TCPCRR:
		return "conn/s"
	default:
		return "trans/s"
	}
}

// ParseTest validates a test name.
func ParseTest(s string) (Test, error) {
	for _, t := range AllTests {
		if string(t) == s {
			return t, nil
		}
	}
	var n []string
	for _, t := range AllTests {
		n = append(n, string(t))
	}
	return "", fmt.Errorf("unknown test %q (known: %s)", s, strings.Join(n, ", "))
}

// Target says where to run: server namespace, client namespace, address to dial.
type Target struct {
	ServerNS string
	ClientNS string
	Addr     string
	// ClientCgroup, when set, is the cgroup v2 directory the client process
	// starts in (socket-level Services act on the lab's cgroup only).
	ClientCgroup string
	// Starter, when set, runs the programs instead of this machine's
	// namespaces; ServerNS and ClientNS then name what it understands (the
	// pods of `vnetlab kube run`).
	Starter Starter
}

// IPv6 says whether the target's address is an IPv6 one.
func (tg Target) IPv6() bool { return family.OfString(tg.Addr) == family.IPv6 }

// ClientCommand is the client's command, in the target's namespace and cgroup.
func (tg Target) ClientCommand(ctx context.Context, name string, args ...string) (Process, error) {
	return tg.clientCommand(ctx, noCPU, name, args...)
}

// clientCommand is ClientCommand started on cpu (noCPU: anywhere).
func (tg Target) clientCommand(ctx context.Context, cpu int, name string, args ...string) (Process, error) {
	if tg.Starter != nil {
		return tg.starterCommand(ctx, tg.ClientNS, cpu, name, args...)
	}
	c := proc.Command(ctx, tg.ClientNS, name, args...)
	if tg.ClientCgroup != "" {
		if err := c.InCgroup(tg.ClientCgroup); err != nil {
			return nil, err
		}
	}
	if cpu != noCPU {
		c.PinTo(cpu)
	}
	return localProcess{c}, nil
}

// Spec is what to measure.
type Spec struct {
	Test     Test
	Duration time.Duration
	Streams  int // parallel streams (iperf3 -P), concurrent flows (rr, crr)
	Size     int // rr/crr request and response bytes, bytes per write (iperf3 -l); 0: the engine's default
	// Rate is the offered rate: udp_stream and udp_pps bits/s (iperf3 -b
	// syntax, "10G"); rr/crr requests (connections) per second, an open
	// loop (rr.go); "" or "max": unlimited, closed loop.
	Rate string
	// Load is how many streams saturate the path while an rr/crr test
	// runs (load.go): latency under load; 0: idle.
	Load int
	// CPU pins the client and the server (--cpu-affinity); the zero
	// value leaves them to the scheduler.
	CPU cpupin.Pins
	// Family is the IP family the target's address is of ("": IPv4), for
	// a Checker that refuses one before any lab is built.
	Family family.Family
}

// Result is one sample.
type Result struct {
	Value       float64
	Retransmits int
	LossPct     float64
	Transfers   float64            // rr/crr: count in the sample
	Bytes       float64            // stream: bytes received
	Latency     map[string]float64 // p50, p90, p99, p99.9, mean
	// LatencySamples is how many latencies Latency's quantiles are from
	// (rr engine; 0: not known). A quantile with too few samples behind
	// it is left out (rrbench.MinSamples: p99.9 needs 10^4).
	LatencySamples int
	Errors         int // connect/IO errors (crr)
	// Schedule: an open-loop sample's schedule and how well it was kept
	// (rr engine at a rate; nil: closed loop). Latency is then from each
	// request's intended send time.
	Schedule *Schedule
}

// Schedule is what an open-loop sample offered and how well it kept to
// it (rrbench's report of it).
type Schedule struct {
	Offered   float64 // requests (crr: connections) per second; the achieved rate is the Result's Value
	Flows     int
	Scheduled int // requests whose intended time fell in the sample
	Sent      int
	Late      int // sent rrbench.LateAfter or more after their intended time
	MaxLagUs  float64
	Behind    bool // over 1% sent late or any left unsent
}

// Driver is one measurement engine.
type Driver interface {
	Name() string
	Supports(t Test) bool
	// Run starts the server in target.ServerNS, runs the client in
	// target.ClientNS, stops both, and returns the parsed result.
	Run(ctx context.Context, target Target, spec Spec) (Result, error)
}

// Checker is implemented by drivers that reject some specs (a size or rate
// the tool cannot do) before any lab is built.
type Checker interface {
	Check(spec Spec) error
}

// Check runs d's Checker, if it has one.
func Check(d Driver, spec Spec) error {
	if c, ok := d.(Checker); ok {
		return c.Check(spec)
	}
	return nil
}

var drivers = map[string]Driver{}

// Register adds a driver (from each driver file's init).
func Register(d Driver) { drivers[d.Name()] = d }

// Get returns a driver by name.
func Get(name string) (Driver, error) {
	d, ok := drivers[name]
	if !ok {
		return nil, fmt.Errorf("unknown engine %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return d, nil
}

// Names lists registered engines.
func Names() []string {
	var n []string
	for k := range drivers {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// DefaultFor picks the engine for a test when --engine is not given.
func DefaultFor(t Test) string {
	switch t {
	case TCPStream, UDPStream, UDPPPS:
		return "iperf3"
	default:
		return "rr"
	}
}

// For resolves the engine that runs test t: name, or the test's default when
// name is empty. It fails when that engine does not run t.
func For(name string, t Test) (Driver, error) {
	if name == "" {
		name = DefaultFor(t)
	}
	d, err := Get(name)
	if err != nil {
		return nil, err
	}
	if !d.Supports(t) {
		return nil, field.Errorf("engine", "engine %s does not run %s: drop {engine} to use the default (%s)", name, t, DefaultFor(t))
	}
	return d, nil
}

package engine

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/measure/rrbench"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// RRPort is where the built-in rr server listens (docker-nat publishes it).
const RRPort = 7001

// rr is vnetlab's own request/response engine (internal/measure/rrbench), with
// netperf's TCP_RR, UDP_RR and TCP_CRR semantics. Its server and client are
// this very binary (`vnetlab rr-server` / `vnetlab rr-client`), started in
// the server and client namespaces; one server per sample.
//
// tcp_crr differs from netperf on purpose: the client closes with RST
// (SO_LINGER 0), so no TIME_WAIT sockets pile up from sample to sample
// (see runCRR in internal/measure/rrbench). A sample with any connect error is
// invalid.
type rr struct{}

func init() { Register(rr{}) }

func (rr) Name() string { return "rr" }
func (rr) Supports(t Test) bool {
	return t == TCPRR || t == UDPRR || t == TCPCRR
}

// Programs: the engine needs only vnetlab itself, and iperf3 for a load
// (checked in Check: only some specs have one).
func (rr) Programs() []string {
	if p, err := SelfBinary(); err == nil {
		return []string{p}
	}
	return nil
}

// Check refuses concurrent flows beyond rr-client's limit, a rate it
// cannot schedule, and a load without iperf3 installed. A share of the
// path's maximum (50%) is checked when the runner has measured that
// maximum and made it a rate (runner: calibrate).
func (rr) Check(spec Spec) error {
	if spec.Streams > rrbench.MaxFlows {
		return field.Errorf("streams", "{streams} %d: the rr engine runs up to %d flows at once", spec.Streams, rrbench.MaxFlows)
	}
	if _, share := knob.RateShare(spec.Rate); !share {
		if _, err := OpenRate(spec.Rate); err != nil {
			return err
		}
	}
	return checkLoad(spec)
}

// OpenLoop: the rr engine takes a rate (an open loop).
func (rr) OpenLoop() bool { return true }

// OpenLoop says whether d runs rr/crr tests open-loop at a rate (the
// latency-under-load probe is one where it can).
func OpenLoop(d Driver) bool {
	o, ok := d.(interface{ OpenLoop() bool })
	return ok && o.OpenLoop()
}

// OpenRate reads an rr/crr test's rate: requests (crr: connections) per
// second, a whole number or with a k suffix (20k), in all its flows; 0
// for "" or max, the closed loop.
func OpenRate(rate string) (float64, error) {
	if rate == "" || rate == ClosedLoop {
		return 0, nil
	}
	n, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(rate, "k"), "K"), 64)
	if err != nil || strings.ContainsAny(rate, "eExXpP_") {
		return 0, field.Errorf("rate", "{rate} %q: use requests per second like 20000 or 20k (rr, crr: an open loop), or %s (closed loop)", rate, ClosedLoop)
	}
	if rate != strings.TrimRight(rate, "kK") {
		n *= 1000
	}
	if n != math.Trunc(n) {
		return 0, field.Errorf("rate", "{rate} %s: use a whole number of requests per second", rate)
	}
	if err := rrbench.CheckRate(n); err != nil {
		if n <= 0 {
			return 0, field.Errorf("rate", "{rate} %s: use a positive number of requests per second, or %s (closed loop)", rate, ClosedLoop)
		}
		return 0, field.Errorf("rate", "{rate}: %v", err)
	}
	return n, nil
}

// ClosedLoop is the rate that leaves rr/crr tests closed-loop (and UDP
// streams unlimited): the default.
const ClosedLoop = "max"

// SelfBinary is the vnetlab executable that runs rr-server and rr-client in
// the pods: $VNETLAB_BIN if set, else the running executable. Under `go
// test` the running executable is a test binary, which has no rr-server.
func SelfBinary() (string, error) {
	if p := os.Getenv("VNETLAB_BIN"); p != "" {
		return p, nil
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the vnetlab executable: %w", err)
	}
	if strings.HasSuffix(p, ".test") {
		return "", fmt.Errorf("the rr engine runs `vnetlab rr-server` in the pods, but %s is a test binary: set VNETLAB_BIN to a built vnetlab (make build; make test sets it)", p)
	}
	return p, nil
}

func rrArgs(t Test) (proto, mode string) {
	switch t {
	case UDPRR:
		return "udp", "rr"
	case TCPCRR:
		return "tcp", "crr"
	}
	return "tcp", "rr"
}

func (d rr) Run(ctx context.Context, tg Target, spec Spec) (Result, error) {
	return runTool(ctx, d, tg, spec)
}

func (rr) invocation(tg Target, spec Spec) (invocation, error) {
	self, err := SelfBinary()
	if err != nil {
		return invocation{}, err
	}
	size := strconv.Itoa(max(spec.Size, 1))
	proto, mode := rrArgs(spec.Test)
	port := strconv.Itoa(RRPort)
	server := []string{self, "rr-server", "--proto", proto, "--port", port, "--size", size}
	if tg.IPv6() { // an IPv6 socket; IPv4 keeps its own (no v4-mapped path on the server)
		server = append(server, "--bind", "::")
	}
	client := []string{self, "rr-client", "--proto", proto, "--mode", mode,
		"--addr", net.JoinHostPort(tg.Addr, port), "--duration", spec.Duration.String(),
		"--size", size, "-o", "json"}
	if spec.CPU.Pinned { // each side pins itself: the same in a pod as here
		server = append(server, "--cpu", strconv.Itoa(spec.CPU.Server))
		client = append(client, "--cpu", strconv.Itoa(spec.CPU.Client))
	}
	rate, err := OpenRate(spec.Rate)
	if err != nil {
		return invocation{}, err
	}
	switch {
	case rate > 0: // the open loop picks its flows (rrbench.OpenFlows)
		flows := strconv.Itoa(rrbench.OpenFlows(rate, spec.Streams))
		server = append(server, "--flows", flows, "--open-loop")
		client = append(client, "--rate", strconv.FormatFloat(rate, 'f', -1, 64), "--flows", flows)
	case spec.Streams > 1: // concurrent flows, each its own connection
		server = append(server, "--flows", strconv.Itoa(spec.Streams))
		client = append(client, "--flows", strconv.Itoa(spec.Streams))
	}
	return invocation{
		server: server,
		ready:  rrbench.ReadyPrefix,
		client: client,
		runs:   spec.Duration,
		parse:  ParseRR,
		failed: "rr-client",
	}, nil
}

// ParseRR turns `rr-client -o json` output into a Result. A crr sample with
// connect errors comes back with its numbers and an error (invalid sample).
func ParseRR(out []byte) (Result, error) {
	rep, err := rrbench.ParseReport(out)
	if err != nil {
		return Result{}, err
	}
	r := Result{
		Value:     rep.Rate,
		Transfers: float64(rep.Transactions),
		Errors:    int(rep.Errors),
		Latency:   map[string]float64{},
		// rr-client left out each quantile with too few samples behind it.
		LatencySamples: int(rep.LatencySamples),
	}
	for _, k := range []string{"p50", "p90", "p99", "p99.9", "mean"} {
		if v, ok := rep.Latency[k]; ok {
			r.Latency[k] = v
		}
	}
	if o := rep.Open; o != nil {
		r.Schedule = &Schedule{Offered: o.Offered, Flows: o.Flows, Scheduled: int(o.Scheduled), Sent: int(o.Sent),
			Late: int(o.Late), MaxLagUs: o.MaxLagUs, Behind: o.Behind}
	}
	if sent := rep.Transactions + rep.Lost; rep.Lost > 0 {
		r.LossPct = 100 * float64(rep.Lost) / float64(sent)
	}
	if rep.Errors > 0 {
		return r, fmt.Errorf("%d connect/exchange errors in the sample (first: %s): sample invalid", rep.Errors, rep.FirstError)
	}
	if rep.Transactions == 0 {
		return r, fmt.Errorf("rr-client completed no transaction")
	}
	return r, nil
}

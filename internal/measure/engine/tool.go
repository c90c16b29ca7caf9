package engine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// The engines that run a program on each side (iperf3, sockperf, rr) share
// one skeleton, runTool: start the server and wait until it listens, mark
// the measured window around the client, then parse what the client
// printed. A driver says only what differs: its commands and its parser
// (pure, tested on captured outputs in testdata/).

// invocation is one sample as a driver spells it.
type invocation struct {
	server []string // program and arguments, run in the server namespace
	ready  string   // a line the server prints once it listens
	client []string // program and arguments, run in the client namespace
	// runs is how long the client is meant to run; it is killed
	// clientGrace later.
	runs  time.Duration
	parse func(out []byte) (Result, error)
	// failed names a client that exited non-zero ("iperf3 client"); explain,
	// when set, finds the tool's own reason in its output ("" if none).
	failed  string
	explain func(out []byte) string
	// starterPins: the tool has no option to pin itself (sockperf), so
	// the starter pins its processes to spec.CPU (affinity.StartOn here,
	// kube guard --cpu in a pod). Tools that pin themselves (iperf3 -A,
	// rr --cpu) get spec.CPU in their arguments instead.
	starterPins bool
}

// tool is a Driver built on runTool.
type tool interface {
	Driver
	invocation(tg Target, spec Spec) (invocation, error)
}

// clientGrace: how long past its duration a client may take (connect,
// start-up, report) before it is killed.
const clientGrace = 20 * time.Second

// runTool runs one sample of d.
func runTool(ctx context.Context, d tool, tg Target, spec Spec) (Result, error) {
	if !d.Supports(spec.Test) {
		return Result{}, fmt.Errorf("the %s engine does not run %s", d.Name(), spec.Test)
	}
	if err := Check(d, spec); err != nil {
		return Result{}, err
	}
	inv, err := d.invocation(tg, spec)
	if err != nil {
		return Result{}, err
	}
	if spec.Load > 0 && spec.Test.RequestResponse() {
		stopLoad, err := startLoad(ctx, tg, spec)
		if err != nil {
			return Result{}, err
		}
		defer stopLoad()
	}
	serverCPU, clientCPU := noCPU, noCPU
	if inv.starterPins && spec.CPU.Pinned {
		serverCPU, clientCPU = spec.CPU.Server, spec.CPU.Client
	}
	stop, err := startServer(ctx, tg, tg.ServerNS, serverCPU, inv.ready, inv.server[0], inv.server[1:]...)
	if err != nil {
		return Result{}, err
	}
	defer stop()

	cctx, cancel := context.WithTimeout(ctx, inv.runs+clientGrace)
	defer cancel()
	client, err := tg.clientCommand(cctx, clientCPU, inv.client[0], inv.client[1:]...)
	if err != nil {
		return Result{}, err
	}
	MeasureStart(ctx)
	out, err := client.Output()
	MeasureEnd(ctx)
	if err != nil {
		if inv.explain != nil {
			if msg := inv.explain(out); msg != "" {
				return Result{}, fmt.Errorf("%s: %s", inv.failed, msg)
			}
		}
		return Result{}, fmt.Errorf("%s: %w", inv.failed, err)
	}
	return inv.parse(out)
}

// serverReadyTimeout: how long a server may take to print its ready line.
const serverReadyTimeout = 5 * time.Second

// startServer starts a server program in ns (a namespace, or what
// tg.Starter understands), on cpu unless it is noCPU, and waits until it
// prints a line containing ready. stop kills it (by its PID) and waits.
// If the server dies first, the error carries what it printed.
func startServer(ctx context.Context, tg Target, ns string, cpu int, ready, name string, args ...string) (stop func(), err error) {
	srv, err := tg.command(ctx, ns, cpu, name, args...)
	if err != nil {
		return nil, err
	}
	stdout, err := srv.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &syncBuffer{}
	srv.SetStderr(stderr)
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, ns, err)
	}
	stop = func() { srv.Kill(); _ = srv.Wait() }
	if err := waitForLine(stdout, ready, serverReadyTimeout); err != nil {
		stop()
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		if msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return nil, fmt.Errorf("%s server in %s: %w", name, ns, err)
	}
	go io.Copy(io.Discard, stdout) // never let a full pipe block the server
	return stop, nil
}

// waitForLine reads r until a line contains want, or the timeout passes.
func waitForLine(r io.Reader, want string, timeout time.Duration) error {
	found := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if strings.Contains(sc.Text(), want) {
				found <- nil
				return
			}
		}
		found <- fmt.Errorf("exited before printing %q", want)
	}()
	select {
	case err := <-found:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("no %q after %s", want, timeout)
	}
}

// syncBuffer is a bytes.Buffer safe to write from exec's copying goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

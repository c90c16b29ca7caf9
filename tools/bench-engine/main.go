// Command bench-engine measures what the built-in rr engine costs against
// C references on one veth-routed lab, client and server pinned to one CPU,
// in interleaved rounds: tcp_rr and udp_rr against tools/rr-ref/rr.c
// (netperf's TCP_RR and UDP_RR loop), tcp_crr against tools/crr-ref/crr.c,
// on request tcp_rr against sockperf ping-pong, and each half of the engine
// (its client, or its server) with rr.c's other half. It prints one line per
// row, the ratio built-in / reference of the medians with its bootstrap 95%
// CI (internal/results/stats), and the machine's load averages before and after:
//
//	engine tcp_rr / C reference  0.950 [0.930, 0.970]  target >= 0.98  SHORT
//
// Run it through scripts/bench-engine.sh, which builds vnetlab and the C
// references; it builds a lab, so run it under the machine's lab lock.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	hostcpu "github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/rrbench"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/results/stats"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// engineTarget is the eBPF data-path table's (docs/performance.md): the engine costs no more than 2% against C.
var engineTarget = analysis.Target{Value: 0.98}

// refPort is where a C reference server listens.
const refPort = 7002

func main() {
	var (
		repeat   = flag.Int("repeat", 7, "interleaved rounds (samples per engine); 5 or more")
		duration = flag.Duration("duration", 2*time.Second, "length of each sample")
		cpu      = flag.Int("cpu", -1, "CPU for client and server (default: the last CPU this process may use)")
		rrRef    = flag.String("rr-ref", "", "the compiled tools/rr-ref/rr.c (rows rr and udp)")
		crrRef   = flag.String("crr-ref", "", "the compiled tools/crr-ref/crr.c (row crr)")
		rows     = flag.String("rows", "rr,udp,crr", "rows to measure: rr (tcp_rr / C), udp (udp_rr / C), crr (tcp_crr / C), sockperf (tcp_rr / sockperf, 14 bytes); rr-client, rr-server, udp-client, udp-server (the engine's one half with rr.c's other / C); netperf, netperf-udp (tcp_rr / netperf TCP_RR, udp_rr / UDP_RR: netperf and netserver on PATH)")
		name     = flag.String("lab", "bench-eng", "lab name")
	)
	flag.Parse()
	if err := run(*repeat, *duration, *cpu, refs{rr: *rrRef, crr: *crrRef}, *rows, *name); err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine:", err)
		os.Exit(1)
	}
}

// sampler measures one sample of one engine.
type sampler func(ctx context.Context, tg engine.Target) (float64, error)

type row struct {
	label        string
	builtin, ref sampler
	builtV, refV []float64
	builtE, refE int
}

// refs are the compiled C references.
type refs struct{ rr, crr string }

func run(repeat int, dur time.Duration, cpu int, ref refs, which, name string) error {
	if repeat < 5 {
		return fmt.Errorf("--repeat %d: use 5 or more (a ratio's CI needs samples)", repeat)
	}
	if _, err := engine.SelfBinary(); err != nil {
		return err
	}
	allowed, err := cpupin.Allowed()
	if err != nil {
		return err
	}
	if cpu < 0 {
		cpu = allowed[len(allowed)-1]
	}
	setting := cpupin.MustParse(strconv.Itoa(cpu))
	if err := setting.Check(allowed); err != nil {
		return err
	}
	pins, _ := setting.Explicit()
	var todo []*row
	for _, w := range strings.Split(which, ",") {
		switch w {
		case "rr", "udp", "rr-client", "rr-server", "udp-client", "udp-server": // netperf's default: 1-byte request and response
			if ref.rr == "" {
				return fmt.Errorf("row %s needs --rr-ref (the compiled tools/rr-ref/rr.c)", w)
			}
			t, proto := engine.TCPRR, "tcp"
			if strings.HasPrefix(w, "udp") {
				t, proto = engine.UDPRR, "udp"
			}
			c := cReference("rr-ref", ref.rr, proto)
			r := &row{label: string(t) + " / C reference", builtin: engineSample("rr", t, 1, dur, pins), ref: pairSample(c, c, 1, dur, pins)}
			if _, half, ok := strings.Cut(w, "-"); ok {
				// Which half costs: the engine's one side with rr.c's
				// other, against rr.c on both sides.
				self, err := engine.SelfBinary()
				if err != nil {
					return err
				}
				g := builtin(self, proto)
				srv, cli := c, g
				if half == "server" {
					srv, cli = g, c
				}
				r.label = fmt.Sprintf("%s, its %s with rr.c's other half / C reference", t, half)
				r.builtin = pairSample(srv, cli, 1, dur, pins)
			}
			todo = append(todo, r)
		case "crr":
			if ref.crr == "" {
				return fmt.Errorf("row crr needs --crr-ref (the compiled tools/crr-ref/crr.c)")
			}
			crr := cReference("crr-ref", ref.crr, "")
			todo = append(todo, &row{label: "tcp_crr / C reference",
				builtin: engineSample("rr", engine.TCPCRR, 1, dur, pins), ref: pairSample(crr, crr, 1, dur, pins)})
		case "netperf", "netperf-udp": // netperf's own TCP_RR / UDP_RR, 1 byte each way
			t, nt := engine.TCPRR, "TCP_RR"
			if w == "netperf-udp" {
				t, nt = engine.UDPRR, "UDP_RR"
			}
			np, err := netperf(nt)
			if err != nil {
				return fmt.Errorf("row %s: %w", w, err)
			}
			todo = append(todo, &row{label: string(t) + " / netperf " + nt,
				builtin: engineSample("rr", t, 1, dur, pins), ref: pairSample(np, np, 1, dur, pins)})
		case "sockperf": // sockperf's messages carry a 14-byte header: both send 14 bytes
			todo = append(todo, &row{label: "tcp_rr / sockperf",
				builtin: engineSample("rr", engine.TCPRR, 14, dur, pins), ref: engineSample("sockperf", engine.TCPRR, 14, dur, pins)})
		default:
			return fmt.Errorf("--rows %q: use rr, udp, crr, sockperf, netperf, netperf-udp, rr-client, rr-server, udp-client and udp-server, comma-separated", which)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ps, err := lab.DefaultPodSpecs(2, lab.DefaultPodCIDR, 1)
	if err != nil {
		return err
	}
	l, err := lab.Up(ctx, lab.Spec{Name: name, Mode: "veth-routed", PodCIDR: lab.DefaultPodCIDR, Pods: ps}, nil)
	if err != nil {
		return err
	}
	defer func() {
		l.Release()
		if err := lab.Down(name, nil); err != nil {
			fmt.Fprintf(os.Stderr, "bench-engine: down %s: %v (run vnetlab clean)\n", name, err)
		}
	}()
	ep := l.State.Paths["pod"]
	tg := engine.Target{ServerNS: ep.ServerNS, ClientNS: ep.ClientNS, Addr: ep.Target}
	fmt.Printf("bench-engine: veth-routed, client and server on CPU %d, %d interleaved rounds of %s; load average before: %s\n", cpu, repeat, dur, hostcpu.LoadAvg())

	// Rounds A B A B ...; within a row the order alternates each round so
	// that neither engine always runs right after the other.
	for r := 0; r < repeat; r++ {
		for _, rw := range todo {
			first, second := &sideRun{rw.builtin, &rw.builtV, &rw.builtE}, &sideRun{rw.ref, &rw.refV, &rw.refE}
			if r%2 == 1 {
				first, second = second, first
			}
			for _, s := range []*sideRun{first, second} {
				if err := ctx.Err(); err != nil {
					return err
				}
				v, err := s.sample(ctx, tg)
				if err != nil {
					*s.errs++
					fmt.Fprintf(os.Stderr, "bench-engine: %s round %d: sample failed: %v\n", rw.label, r+1, err)
					continue
				}
				*s.vals = append(*s.vals, v)
			}
		}
	}
	fmt.Printf("bench-engine: load average after: %s\n", hostcpu.LoadAvg())
	for _, rw := range todo {
		if len(rw.builtV) < 2 || len(rw.refV) < 2 {
			fmt.Printf("engine %s  n/a (valid samples: built-in %d, reference %d)\n", rw.label, len(rw.builtV), len(rw.refV))
			continue
		}
		fmt.Printf("engine %s  %s\n", rw.label, analysis.RatioLine(rw.builtV, rw.refV, engineTarget))
		fmt.Fprintf(os.Stderr, "  %s: built-in median %.0f/s (CV %.1f%%, %s), reference median %.0f/s (CV %.1f%%, %s)\n",
			rw.label, stats.Median(rw.builtV), 100*stats.CV(rw.builtV), list(rw.builtV),
			stats.Median(rw.refV), 100*stats.CV(rw.refV), list(rw.refV))
	}
	return nil
}

type sideRun struct {
	sample sampler
	vals   *[]float64
	errs   *int
}

func list(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.FormatFloat(x, 'f', 0, 64))
	}
	return strings.Join(s, " ")
}

// engineSample runs one sample of a registered engine.
func engineSample(name string, t engine.Test, size int, dur time.Duration, pins cpupin.Pins) sampler {
	return func(ctx context.Context, tg engine.Target) (float64, error) {
		d, err := engine.Get(name)
		if err != nil {
			return 0, err
		}
		r, err := d.Run(ctx, tg, engine.Spec{Test: t, Duration: dur, Size: size, CPU: pins})
		return r.Value, err
	}
}

// refRateRE is the rate both C references print last.
var refRateRE = regexp.MustCompile(`rate ([0-9.]+)`)

// program is one benchmark's two halves as command lines: a C reference's
// or the built-in engine's.
type program struct {
	name   string
	ready  string // what its server prints once it listens
	server func(port, size string) []string
	client func(addr, port, size string, dur time.Duration) []string
	rate   func(out []byte) (float64, error)
}

// cReference is a C reference (tools/rr-ref, tools/crr-ref), name being
// what it prints; proto ("tcp", "udp") is the first argument of rr-ref,
// crr-ref has none.
func cReference(name, bin, proto string) program {
	var first []string
	if proto != "" {
		first = []string{proto}
	}
	return program{name: name, ready: name + " ready",
		server: func(port, size string) []string {
			return append(append([]string{bin, "server"}, first...), port, size)
		},
		client: func(addr, port, size string, dur time.Duration) []string {
			return append(append([]string{bin, "client"}, first...), addr, port, size, strconv.FormatFloat(dur.Seconds(), 'f', -1, 64))
		},
		rate: func(out []byte) (float64, error) {
			m := refRateRE.FindStringSubmatch(string(out))
			if m == nil {
				return 0, fmt.Errorf("%s printed %q", name, out)
			}
			return strconv.ParseFloat(m[1], 64)
		},
	}
}

// netperf is netperf's test nt (TCP_RR, UDP_RR) between netserver and
// netperf as found on PATH, pinned from outside as the C references are;
// netperf prints only its transaction rate (-P 0, -o THROUGHPUT).
func netperf(nt string) (program, error) {
	client, err := exec.LookPath("netperf")
	if err != nil {
		return program{}, fmt.Errorf("netperf is not on PATH (it is not in Debian: build it from its public source)")
	}
	server, err := exec.LookPath("netserver")
	if err != nil {
		return program{}, fmt.Errorf("netserver is not on PATH")
	}
	return program{name: "netperf", ready: "Starting netserver",
		server: func(port, _ string) []string { return []string{server, "-D", "-p", port} },
		client: func(addr, port, size string, dur time.Duration) []string {
			return []string{client, "-H", addr, "-p", port, "-t", nt, "-l", strconv.FormatFloat(dur.Seconds(), 'f', -1, 64), "-P", "0",
				"--", "-r", size + "," + size, "-o", "THROUGHPUT"}
		},
		rate: func(out []byte) (float64, error) {
			f := strings.Fields(string(out))
			if len(f) == 0 {
				return 0, fmt.Errorf("netperf printed nothing")
			}
			return strconv.ParseFloat(f[len(f)-1], 64)
		},
	}, nil
}

// builtin is the engine's rr-server and rr-client (self: the vnetlab
// binary), started as the rr driver starts them but pinned from outside,
// as the C references are.
func builtin(self, proto string) program {
	return program{name: "the engine's rr", ready: rrbench.ReadyPrefix,
		server: func(port, size string) []string {
			return []string{self, "rr-server", "--proto", proto, "--port", port, "--size", size}
		},
		client: func(addr, port, size string, dur time.Duration) []string {
			return []string{self, "rr-client", "--proto", proto, "--addr", net.JoinHostPort(addr, port), "--size", size, "--duration", dur.String(), "-o", "json"}
		},
		rate: func(out []byte) (float64, error) {
			r, err := rrbench.ParseReport(out)
			if err != nil {
				return 0, err
			}
			return r.Rate, nil
		},
	}
}

// pairSample runs one sample of srv's server in the server namespace and
// cli's client in the client namespace, both started pinned.
func pairSample(srv, cli program, size int, dur time.Duration, pins cpupin.Pins) sampler {
	return func(ctx context.Context, tg engine.Target) (float64, error) {
		port, sz := strconv.Itoa(refPort), strconv.Itoa(size)
		sargs := srv.server(port, sz)
		s := proc.Command(ctx, tg.ServerNS, sargs[0], sargs[1:]...)
		s.PinTo(pins.Server)
		out, err := s.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := s.Start(); err != nil {
			return 0, err
		}
		defer func() { _ = s.Process.Kill(); _ = s.Wait() }()
		sc := bufio.NewScanner(out)
		if !sc.Scan() || !strings.Contains(sc.Text(), srv.ready) {
			return 0, fmt.Errorf("%s server did not start", srv.name)
		}
		// The references have no timeouts of their own: a dead server or a
		// lost datagram must not hang the benchmark.
		cctx, cancel := context.WithTimeout(ctx, dur+20*time.Second)
		defer cancel()
		cargs := cli.client(tg.Addr, port, sz, dur)
		c := proc.Command(cctx, tg.ClientNS, cargs[0], cargs[1:]...)
		c.PinTo(pins.Client)
		text, err := c.Output()
		if err != nil {
			return 0, fmt.Errorf("%s client: %w", cli.name, err)
		}
		return cli.rate(text)
	}
}

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Iperf3Port is where the iperf3 server listens (its default).
const Iperf3Port = 5201

// iperf3 drives `iperf3 -s -1` in the server namespace and `iperf3 -c -J`
// in the client namespace; one server per sample, so samples never share state.
type iperf3 struct{}

func init() { Register(iperf3{}) }

func (iperf3) Name() string         { return "iperf3" }
func (iperf3) Supports(t Test) bool { return t == TCPStream || t == UDPStream || t == UDPPPS }

// UDP datagram sizes iperf3 takes (-l): its header needs 16 bytes, and an
// IPv4 UDP payload is at most 65507.
const (
	iperf3MinUDPSize = 16
	iperf3MaxUDPSize = 65507
	// UDPPPSSize is udp_pps's datagram payload without a size: small
	// datagrams, whose rate the per-packet costs bound.
	UDPPPSSize = 64
)

// writeSize is iperf3's -l for spec: the size asked, udp_pps's default,
// or 0 (iperf3's own: 128 KB for TCP, the path MTU's payload for UDP).
func writeSize(spec Spec) int {
	if spec.Size == 0 && spec.Test == UDPPPS {
		return UDPPPSSize
	}
	return spec.Size
}

func (d iperf3) Run(ctx context.Context, tg Target, spec Spec) (Result, error) {
	return runTool(ctx, d, tg, spec)
}

func (iperf3) invocation(tg Target, spec Spec) (invocation, error) {
	port := strconv.Itoa(Iperf3Port)
	secs := max(spec.Duration.Seconds(), 1)
	// --connect-timeout: a path that cannot carry a connection at all (a
	// clusterIP on a bridge with nf-call off) fails in 5 s with iperf3's own
	// "unable to connect" instead of hanging until the client is killed.
	client := []string{"iperf3", "-c", tg.Addr, "-p", port, "-J", "-t", strconv.FormatFloat(secs, 'f', -1, 64), "--connect-timeout", "5000"}
	// -P: iperf3 before 3.16 (Debian 12 has 3.12) runs every stream in
	// one thread per side; on this 2-CPU machine the client's and the
	// server's threads already take both CPUs, so N processes would add
	// no CPU to share out.
	if spec.Streams > 1 {
		client = append(client, "-P", strconv.Itoa(spec.Streams))
	}
	if l := writeSize(spec); l > 0 {
		client = append(client, "-l", strconv.Itoa(l))
	}
	if tg.IPv6() {
		client = append(client, "-6")
	}
	// --forceflush: iperf3 block-buffers stdout into a pipe, hiding "Server listening".
	server := []string{"iperf3", "-s", "-1", "-p", port, "--forceflush"}
	if spec.CPU.Pinned { // iperf3's own -A on each side
		client = append(client, "-A", strconv.Itoa(spec.CPU.Client))
		server = append(server, "-A", strconv.Itoa(spec.CPU.Server))
	}
	if spec.Test == UDPStream || spec.Test == UDPPPS {
		rate, err := iperf3Rate(spec.Rate)
		if err != nil {
			return invocation{}, err
		}
		client = append(client, "-u", "-b", rate)
	}
	return invocation{
		server: server,
		ready:  "Server listening",
		client: client,
		runs:   spec.Duration,
		parse:  func(out []byte) (Result, error) { return ParseIperf3(out, spec.Test) },
		failed: "iperf3 client", explain: iperf3Error,
	}, nil
}

// Check validates the UDP rate and datagram size before any lab is built.
func (iperf3) Check(spec Spec) error {
	if l := writeSize(spec); (spec.Test == UDPStream || spec.Test == UDPPPS) && l != 0 && (l < iperf3MinUDPSize || l > iperf3MaxUDPSize) {
		return field.Errorf("size", "{size} %d: iperf3 sends UDP datagrams of %d to %d bytes", l, iperf3MinUDPSize, iperf3MaxUDPSize)
	}
	_, err := iperf3Rate(spec.Rate)
	return err
}

var rateRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[kKmMgGtT]?$`)

// iperf3Rate maps --rate to iperf3's -b: "max" (or "" or "0") is -b 0, no
// limit: the sender runs as fast as it can and the loss % says how much the
// path or the receiver dropped. Otherwise bits/s with an optional K/M/G/T
// suffix, e.g. 500M or 2.5G.
func iperf3Rate(rate string) (string, error) {
	switch rate {
	case "", "max", "0":
		return "0", nil
	}
	if !rateRE.MatchString(rate) {
		return "", fmt.Errorf("rate %q: use max or bits per second like 500M, 2.5G (iperf3 -b syntax)", rate)
	}
	return rate, nil
}

type iperf3JSON struct {
	Error string `json:"error"`
	End   struct {
		SumSent struct {
			Bytes         float64 `json:"bytes"`
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int     `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived iperf3Sum `json:"sum_received"`
		Sum         iperf3Sum `json:"sum"` // UDP
	} `json:"end"`
}

// iperf3Sum is one of iperf3's totals (UDP ones count datagrams).
type iperf3Sum struct {
	Seconds       float64 `json:"seconds"`
	Bytes         float64 `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
	LostPercent   float64 `json:"lost_percent"`
	Packets       float64 `json:"packets"`
	LostPackets   float64 `json:"lost_packets"`
}

func iperf3Error(out []byte) string {
	var j iperf3JSON
	if json.Unmarshal(out, &j) == nil {
		return j.Error
	}
	return ""
}

// ParseIperf3 turns `iperf3 -J` client output into a Result: TCP uses the
// receiver's rate, UDP the received rate (sent rate minus loss), udp_pps
// the datagrams received per second (sent minus lost).
func ParseIperf3(out []byte, t Test) (Result, error) {
	var j iperf3JSON
	if err := json.Unmarshal(out, &j); err != nil {
		return Result{}, fmt.Errorf("iperf3 output is not JSON: %w", err)
	}
	if j.Error != "" {
		return Result{}, fmt.Errorf("iperf3: %s", j.Error)
	}
	var r Result
	if t == UDPPPS {
		s := j.End.SumReceived
		if s.Seconds <= 0 || s.Packets <= 0 {
			s = j.End.Sum
		}
		got := s.Packets - s.LostPackets
		r.LossPct, r.Transfers, r.Bytes = s.LostPercent, got, s.Bytes
		if s.Seconds > 0 {
			r.Value = got / s.Seconds
		}
	} else if t == UDPStream {
		s := j.End.Sum
		r.LossPct = s.LostPercent
		r.Value = s.BitsPerSecond * (1 - s.LostPercent/100) / 1e9
		r.Bytes = s.Bytes * (1 - s.LostPercent/100)
		if j.End.SumReceived.BitsPerSecond > 0 { // iperf3 >= 3.8 reports the receiver side
			r.Value = j.End.SumReceived.BitsPerSecond / 1e9
			r.Bytes = j.End.SumReceived.Bytes
		}
	} else {
		r.Value = j.End.SumReceived.BitsPerSecond / 1e9
		r.Bytes = j.End.SumReceived.Bytes
		r.Retransmits = j.End.SumSent.Retransmits
	}
	if r.Value <= 0 {
		return r, fmt.Errorf("iperf3 reported no data received")
	}
	return r, nil
}

// Programs lists what must be installed.
func (iperf3) Programs() []string { return []string{"iperf3"} }

package engine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// SockperfPort is sockperf's default port (docker-nat publishes it).
const SockperfPort = 11111

// SockperfMinSize: every sockperf message carries its 14-byte header.
const SockperfMinSize = 14

// sockperf drives `sockperf server` in the server namespace and `sockperf
// ping-pong --full-rtt` in the client namespace: one message outstanding,
// so its round-trip time is one transaction (netperf's TCP_RR / UDP_RR).
//
// The rate is sockperf's own count over its "valid duration" (it drops a
// 400 ms warm-up and the end of the run), which equals 1e6/avg-rtt when
// messages follow each other back to back.
type sockperf struct{}

func init() { Register(sockperf{}) }

func (sockperf) Name() string         { return "sockperf" }
func (sockperf) Supports(t Test) bool { return t == TCPRR || t == UDPRR }
func (sockperf) Programs() []string   { return []string{"sockperf"} }

// Check refuses sizes sockperf cannot send, and concurrent flows (one
// sockperf client is one flow), before anything is built.
func (sockperf) Check(spec Spec) error {
	if spec.Size < SockperfMinSize {
		return field.Errorf("size", "sockperf sends at least %d bytes per message (its header), not %d: use {size} %d or more with {engine} sockperf", SockperfMinSize, spec.Size, SockperfMinSize)
	}
	if spec.Streams > 1 {
		return field.Errorf("streams", "{streams} %d: sockperf runs one flow; use the rr engine (drop {engine}) for concurrent flows", spec.Streams)
	}
	if spec.Family.Or() == family.IPv6 {
		return sockperfIPv6()
	}
	if spec.Rate != "" && spec.Rate != ClosedLoop {
		return field.Errorf("rate", "{rate} %s: sockperf's ping-pong is a closed loop; the rr engine (drop {engine}) runs one at a rate", spec.Rate)
	}
	return checkLoad(spec)
}

func (d sockperf) Run(ctx context.Context, tg Target, spec Spec) (Result, error) {
	return runTool(ctx, d, tg, spec)
}

func (sockperf) invocation(tg Target, spec Spec) (invocation, error) {
	port := strconv.Itoa(SockperfPort)
	var proto []string
	if spec.Test == TCPRR {
		proto = []string{"--tcp"}
	}
	secs := max(int(math.Ceil(spec.Duration.Seconds())), 1) // -t takes whole seconds
	return invocation{
		server: append([]string{"sockperf", "server", "-i", sockperfAny(tg), "-p", port}, proto...),
		// printed once its sockets are bound (and listening)
		ready: "to block on socket",
		client: append([]string{"sockperf", "ping-pong", "-i", tg.Addr, "-p", port, "-t", strconv.Itoa(secs),
			"-m", strconv.Itoa(spec.Size), "--full-rtt"}, proto...),
		runs:        time.Duration(secs) * time.Second,
		parse:       ParseSockperf,
		failed:      "sockperf client",
		starterPins: true, // sockperf 3.7's ping-pong has no affinity option
	}, nil
}

var (
	ansiRE        = regexp.MustCompile(`\x1b\[[0-9;]*m`)
	spValidRE     = regexp.MustCompile(`\[Valid Duration\] RunTime=([0-9.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)`)
	spAvgRE       = regexp.MustCompile(`avg-(?:rtt|latency)=([0-9.]+)`)
	spDroppedRE   = regexp.MustCompile(`# dropped messages = (\d+)`)
	spPercentRE   = regexp.MustCompile(`percentile ([0-9.]+) =\s*([0-9.]+)`)
	spFullRTTNote = "Round trip"
)

// ParseSockperf reads `sockperf ping-pong --full-rtt` output (sockperf
// 3.7; it exits 0 even on failure, so the text is the only verdict).
func ParseSockperf(out []byte) (Result, error) {
	text := ansiRE.ReplaceAllString(string(out), "")
	var (
		r                  = Result{Latency: map[string]float64{}}
		secs               float64
		sent, recv, drops  float64
		haveValid, fullRTT bool
	)
	sc := bufio.NewScanner(bytes.NewReader([]byte(text)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "ERROR"):
			return Result{}, fmt.Errorf("sockperf: %s", strings.TrimSpace(strings.TrimPrefix(line, "sockperf:")))
		case strings.Contains(line, "No messages were received"):
			return Result{}, fmt.Errorf("sockperf: no messages were received from the server")
		case strings.Contains(line, "Summary:"):
			fullRTT = strings.Contains(line, spFullRTTNote)
		}
		if m := spValidRE.FindStringSubmatch(line); m != nil {
			secs, _ = strconv.ParseFloat(m[1], 64)
			sent, _ = strconv.ParseFloat(m[2], 64)
			recv, _ = strconv.ParseFloat(m[3], 64)
			haveValid = true
		}
		if m := spAvgRE.FindStringSubmatch(line); m != nil {
			r.Latency["mean"], _ = strconv.ParseFloat(m[1], 64)
		}
		if m := spDroppedRE.FindStringSubmatch(line); m != nil {
			drops, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := spPercentRE.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			switch m[1] {
			case "50.000":
				r.Latency["p50"] = v
			case "90.000":
				r.Latency["p90"] = v
			case "99.000":
				r.Latency["p99"] = v
			case "99.900":
				r.Latency["p99.9"] = v
			}
		}
	}
	if !haveValid || r.Latency["mean"] == 0 {
		return Result{}, fmt.Errorf("sockperf printed no statistics (unexpected output: %q)", lastLines(text, 3))
	}
	if !fullRTT {
		return Result{}, fmt.Errorf("sockperf reported one-way latency, not round trips: run it with --full-rtt")
	}
	r.Transfers = recv
	if secs > 0 && recv > 0 {
		r.Value = recv / secs
	} else {
		r.Value = 1e6 / r.Latency["mean"]
	}
	if sent > 0 && drops > 0 {
		r.LossPct = 100 * drops / sent
	}
	return r, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

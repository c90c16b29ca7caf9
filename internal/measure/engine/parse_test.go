package engine

import (
	"github.com/vnetlab/vnetlab/internal/results"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The testdata files are real outputs captured on this machine (sockperf
// 3.7, iperf3 3.12, vnetlab rr-client); see testdata/README.md.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

func TestParseSockperf(t *testing.T) {
	cases := []struct {
		file                                   string
		rate, trans, mean, p50, p90, p99, p999 float64
		loss                                   float64
	}{
		// [Valid Duration] RunTime=1.550 sec; ReceivedMessages=63881 -> 63881/1.55
		{"sockperf-tcp-rr.txt", 63881 / 1.55, 63881, 24.227, 13.6, 17.696, 244.531, 874.023, 0},
		{"sockperf-udp-rr.txt", 55842 / 1.55, 55842, 27.73, 10.745, 11.707, 139.105, 1933.253, 0},
	}
	for _, c := range cases {
		r, err := ParseSockperf(readTestdata(t, c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		want := map[string]float64{"mean": c.mean, "p50": c.p50, "p90": c.p90, "p99": c.p99, "p99.9": c.p999}
		for k, w := range want {
			if !near(r.Latency[k], w) {
				t.Errorf("%s: %s = %v, want %v", c.file, k, r.Latency[k], w)
			}
		}
		if !near(r.Value, c.rate) || !near(r.Transfers, c.trans) || !near(r.LossPct, c.loss) {
			t.Errorf("%s: rate %v transactions %v loss %v, want %v %v %v", c.file, r.Value, r.Transfers, r.LossPct, c.rate, c.trans, c.loss)
		}
		// One outstanding message: the count over time agrees with 1e6/avg-rtt
		// to within the warm-up gaps.
		if ratio := r.Value / (1e6 / r.Latency["mean"]); ratio < 0.9 || ratio > 1.1 {
			t.Errorf("%s: rate %v vs 1e6/avg-rtt %v", c.file, r.Value, 1e6/r.Latency["mean"])
		}
	}
	for file, want := range map[string]string{
		"sockperf-refused.txt":       "Connection refused",
		"sockperf-no-server-udp.txt": "no messages were received",
		"sockperf-tcp-oneway.txt":    "--full-rtt",
	} {
		if _, err := ParseSockperf(readTestdata(t, file)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to say %q", file, err, want)
		}
	}
	if _, err := ParseSockperf([]byte("sockperf: == version #3.7 ==\n")); err == nil {
		t.Error("output without statistics accepted")
	}
}

func TestParseRR(t *testing.T) {
	for _, c := range []struct {
		file        string
		rate, trans float64
		p50, p999   float64
		loss        float64
		errs        int
		wantErr     string
	}{
		// a 684 ms stall (busy machine) stretched this 1 s sample to 1.57 s.
		{"rr-tcp-rr.json", 30799.674106427643, 48447, 13.856, 542.72, 0, 0, ""},
		{"rr-udp-rr.json", 81823.19510522975, 81824, 11.168, 110.336, 0, 0, ""},
		{"rr-tcp-crr.json", 8885.496272330825, 8886, 92.928, 1617.92, 0, 0, ""},
		// iptables dropped every 2000th request: 7 lost of 12979.
		{"rr-udp-rr-loss.json", 12971.842534803469, 12972, 12.064, 159.232, 100 * 7.0 / 12979, 0, ""},
		// the server came up 0.3 s into the sample: connection refused before.
		{"rr-tcp-crr-errors.json", 5406.682606104291, 5407, 67.328, 3366.912, 0, 13960, "13960 connect/exchange errors"},
	} {
		r, err := ParseRR(readTestdata(t, c.file))
		if c.wantErr == "" && err != nil {
			t.Errorf("%s: %v", c.file, err)
		}
		if c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: err = %v, want %q (a crr sample with connect errors is invalid)", c.file, err, c.wantErr)
		}
		if !near(r.Value, c.rate) || !near(r.Transfers, c.trans) || !near(r.Latency["p50"], c.p50) ||
			!near(r.Latency["p99.9"], c.p999) || !near(r.LossPct, c.loss) || r.Errors != c.errs {
			t.Errorf("%s: got %+v", c.file, r)
		}
		checkLatencyOrder(t, c.file, r.Latency, 0)
	}
	for _, bad := range []string{"", "{}", "not json", `{"proto":"tcp","mode":"rr","transactions":5}`} {
		if _, err := ParseRR([]byte(bad)); err == nil {
			t.Errorf("ParseRR(%q) accepted", bad)
		}
	}
}

// checkLatencyOrder: each quantile is there and above the one before it;
// one with too few of the n latencies behind it (n > 0: the engine said)
// must be left out instead.
func checkLatencyOrder(t *testing.T, what string, lat map[string]float64, n int) {
	t.Helper()
	prev := 0.0
	for _, q := range results.LatencyQuantiles {
		k := q.Key
		v, ok := lat[k]
		if n > 0 && n < q.MinSamples() {
			if ok {
				t.Errorf("%s: latency %s from %d latencies, under its %d", what, k, n, q.MinSamples())
			}
			continue
		}
		if !ok || v <= 0 {
			t.Errorf("%s: latency %s missing (%v)", what, k, lat)
			return
		}
		if v < prev {
			t.Errorf("%s: %s = %v below the previous percentile %v", what, k, v, prev)
		}
		prev = v
	}
}

func TestParseIperf3UDP(t *testing.T) {
	// -b 0: the sender outran the receiver; value is what arrived.
	r, err := ParseIperf3(readTestdata(t, "iperf3-udp-max.json"), UDPStream)
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.Value, 8829326283.87917/1e9) || !near(r.LossPct, 66.28602882305844) || !near(r.Bytes, 1103855616) {
		t.Errorf("max rate: got %+v", r)
	}
	r, err = ParseIperf3(readTestdata(t, "iperf3-udp-100m.json"), UDPStream)
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.Value, 100123889.2927168/1e9) || r.LossPct != 0 {
		t.Errorf("100M: got %+v", r)
	}
}

func TestIperf3Rate(t *testing.T) {
	for in, want := range map[string]string{"": "0", "max": "0", "0": "0", "100M": "100M", "2.5G": "2.5G", "750k": "750k"} {
		if got, err := iperf3Rate(in); err != nil || got != want {
			t.Errorf("iperf3Rate(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"fast", "-1", "10Q", "1G/5", "1 G"} {
		if _, err := iperf3Rate(bad); err == nil {
			t.Errorf("iperf3Rate(%q) accepted", bad)
		}
	}
}

func TestChecks(t *testing.T) {
	sp, _ := Get("sockperf")
	if err := Check(sp, Spec{Test: TCPRR, Size: 1}); err == nil || !strings.Contains(err.Error(), "--size 14") {
		t.Errorf("sockperf with 1-byte messages: err = %v", err)
	}
	if err := Check(sp, Spec{Test: TCPRR, Size: 14}); err != nil {
		t.Error(err)
	}
	ip, _ := Get("iperf3")
	if err := Check(ip, Spec{Test: UDPStream, Rate: "lots"}); err == nil {
		t.Error("iperf3 accepted rate \"lots\"")
	}
	rr, _ := Get("rr")
	if err := Check(rr, Spec{Test: TCPCRR, Size: 1}); err != nil {
		t.Error(err)
	}
	// A share of the path's maximum is made a rate by the runner once the
	// maximum is measured; sockperf, a closed loop, takes no rate at all.
	if err := Check(rr, Spec{Test: TCPRR, Rate: "50%"}); err != nil || !OpenLoop(rr) || OpenLoop(sp) {
		t.Errorf("rr at 50%%: %v; open loops: rr %v, sockperf %v", err, OpenLoop(rr), OpenLoop(sp))
	}
	if err := Check(sp, Spec{Test: TCPRR, Size: 14, Rate: "2000"}); err == nil || !strings.Contains(err.Error(), "closed loop") {
		t.Errorf("sockperf at 2000/s: %v", err)
	}
	for _, c := range []struct {
		engine string
		test   Test
		ok     bool
	}{{"rr", TCPRR, true}, {"rr", UDPRR, true}, {"rr", TCPCRR, true}, {"rr", TCPStream, false},
		{"sockperf", TCPRR, true}, {"sockperf", UDPRR, true}, {"sockperf", TCPCRR, false}} {
		d, _ := Get(c.engine)
		if d.Supports(c.test) != c.ok {
			t.Errorf("%s supports %s: got %v", c.engine, c.test, !c.ok)
		}
	}
}

// sockperf 3.7 (Debian 12's) cannot dial IPv6: such a cell is refused with
// the engine to use instead; 3.8 and later are let through.
func TestSockperfIPv6(t *testing.T) {
	if v := parseSockperfVersion("sockperf, version 3.7-no.git\n   compiled 2021"); v != [2]int{3, 7} {
		t.Fatalf("version %v", v)
	}
	err := sockperfIPv6Check([2]int{3, 7})
	if err == nil || !strings.Contains(err.Error(), "sockperf 3.7 takes IPv4 addresses only") || !strings.Contains(err.Error(), "rr engine") {
		t.Errorf("3.7: %v", err)
	}
	for _, v := range [][2]int{{3, 8}, {3, 10}, {4, 0}} {
		if err := sockperfIPv6Check(v); err != nil {
			t.Errorf("%v: %v", v, err)
		}
	}
}

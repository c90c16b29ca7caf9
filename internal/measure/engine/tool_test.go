package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/system/cpupin"
)

// What each driver hands the shared skeleton: the commands on both sides,
// the server's ready line and how long the client runs.
func TestInvocations(t *testing.T) {
	t.Setenv("VNETLAB_BIN", "/opt/vnetlab")
	tg := Target{ServerNS: "srv", ClientNS: "cli", Addr: "192.168.10.10"}
	cases := []struct {
		engine         string
		spec           Spec
		server, client string
		ready          string
		runs           time.Duration
	}{
		{"iperf3", Spec{Test: UDPStream, Duration: 4 * time.Second, Streams: 2, Rate: "100M"},
			"iperf3 -s -1 -p 5201 --forceflush",
			"iperf3 -c 192.168.10.10 -p 5201 -J -t 4 --connect-timeout 5000 -P 2 -u -b 100M", "Server listening", 4 * time.Second},
		{"iperf3", Spec{Test: TCPStream, Duration: 500 * time.Millisecond, Streams: 1},
			"iperf3 -s -1 -p 5201 --forceflush",
			"iperf3 -c 192.168.10.10 -p 5201 -J -t 1 --connect-timeout 5000", "Server listening", 500 * time.Millisecond},
		{"sockperf", Spec{Test: TCPRR, Duration: 1500 * time.Millisecond, Size: 14},
			"sockperf server -i 0.0.0.0 -p 11111 --tcp",
			"sockperf ping-pong -i 192.168.10.10 -p 11111 -t 2 -m 14 --full-rtt --tcp", "to block on socket", 2 * time.Second},
		{"rr", Spec{Test: TCPCRR, Duration: 3 * time.Second},
			"/opt/vnetlab rr-server --proto tcp --port 7001 --size 1",
			"/opt/vnetlab rr-client --proto tcp --mode crr --addr 192.168.10.10:7001 --duration 3s --size 1 -o json", "rr-server ready", 3 * time.Second},
	}
	for _, c := range cases {
		d, err := Get(c.engine)
		if err != nil {
			t.Fatal(err)
		}
		inv, err := d.(tool).invocation(tg, c.spec)
		if err != nil {
			t.Fatalf("%s %s: %v", c.engine, c.spec.Test, err)
		}
		if got := strings.Join(inv.server, " "); got != c.server {
			t.Errorf("%s %s server:\n got %s\nwant %s", c.engine, c.spec.Test, got, c.server)
		}
		if got := strings.Join(inv.client, " "); got != c.client {
			t.Errorf("%s %s client:\n got %s\nwant %s", c.engine, c.spec.Test, got, c.client)
		}
		if inv.ready != c.ready {
			t.Errorf("%s ready line %q, want %q", c.engine, inv.ready, c.ready)
		}
		if inv.runs != c.runs || inv.parse == nil || inv.failed == "" {
			t.Errorf("%s %s: runs %s (want %s), parse set %v, failed %q", c.engine, c.spec.Test, inv.runs, c.runs, inv.parse != nil, inv.failed)
		}
	}
	// --cpu-affinity: iperf3 and rr pin themselves (their own option on each
	// side), sockperf, which has none, is pinned by whoever starts it.
	pins := cpupin.Pins{Pinned: true, Client: 0, Server: 1}
	pinned := []struct {
		engine         string
		test           Test
		server, client string
		starter        bool
	}{
		{"iperf3", TCPStream, "-A 1", "-A 0", false},
		{"rr", TCPRR, "--cpu 1", "--cpu 0", false},
		{"sockperf", TCPRR, "", "", true},
	}
	for _, c := range pinned {
		d, _ := Get(c.engine)
		inv, err := d.(tool).invocation(tg, Spec{Test: c.test, Duration: time.Second, Size: 14, CPU: pins})
		if err != nil {
			t.Fatal(err)
		}
		server, client := strings.Join(inv.server, " "), strings.Join(inv.client, " ")
		if c.server != "" && (!strings.HasSuffix(server, " "+c.server) || !strings.HasSuffix(client, " "+c.client)) {
			t.Errorf("%s pinned: server %q, client %q; want them to end in %q / %q", c.engine, server, client, c.server, c.client)
		}
		if inv.starterPins != c.starter {
			t.Errorf("%s: pinned by its starter %v, want %v", c.engine, inv.starterPins, c.starter)
		}
		unpinned, _ := d.(tool).invocation(tg, Spec{Test: c.test, Duration: time.Second, Size: 14})
		if u := strings.Join(unpinned.client, " "); strings.Contains(u, "-A") || strings.Contains(u, "--cpu") {
			t.Errorf("%s unpinned client pins: %q", c.engine, u)
		}
	}

	// Every registered engine that starts programs goes through the skeleton.
	for _, n := range Names() {
		d, _ := Get(n)
		if _, ok := d.(tool); !ok {
			t.Errorf("engine %s does not use the shared skeleton", n)
		}
	}
	if !slices.Contains(Names(), "rr") {
		t.Error("rr engine not registered")
	}
}

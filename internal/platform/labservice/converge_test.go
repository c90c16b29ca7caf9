package labservice

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// svc converge on a real lab, per provider: every change of each kind is
// applied on the prober pod, each within the change timeout of its write
// (a lab's write is synchronous: its latency is the transaction's and a
// probe interval), none is shown before its write, and the Service is
// gone afterwards. The prober pod's ephemeral port range is narrowed to
// 64 ports: a prober that let the kernel pick its source ports would reuse
// each within 32 ms, and an earlier probe's conntrack entry (iptables,
// nftables) would answer for a deleted Service or hide a created one (on
// kube-proxy such changes read 0 ms); the prober's own port cycle does
// not depend on that range. The machine's other work is measured beside
// the changes: with iptables a shell's loop at the lowest priority, started
// by the test beside the run, is found and named with the CPU it took, and
// flags every change; vnetlab's own probers and servers are never other
// work.
func TestFloorConverges(t *testing.T) {
	requireRoot(t)
	if os.Getenv("VNETLAB_BIN") == "" {
		t.Skip("svc converge runs vnetlab whoami and vnetlab kube probe in the pods: set VNETLAB_BIN (make test does)")
	}
	for _, p := range []string{IPTables, NFTables, EBPF} {
		t.Run(p, func(t *testing.T) {
			st := newLab(t, "svfl"+p[:2], "veth-routed", 3, nil)
			prober := st.Pods[2]
			if err := nsutil.Do(prober.NS, func() error {
				return os.WriteFile("/proc/sys/net/ipv4/ip_local_port_range", []byte("40000 40063"), 0o644)
			}); err != nil {
				t.Fatal(err)
			}
			pace := converge.DefaultPace()
			// A lab's transaction is a few ms (the ebpf provider's, once
			// it loaded every program: 1.8 s, 6.8 s with the probers on a
			// busy 2-vCPU machine); 5 s is room for a busy machine.
			pace.Changes, pace.ChangeTimeout, pace.WarmUpTimeout = 10, 5*time.Second, time.Minute
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			stopLoop := func() {}
			if p == IPTables {
				stopLoop = otherLoop(t)
			}
			c, err := Floor(ctx, FloorSpec{Lab: st.Name, Provider: p, Pace: pace}, t.Logf)
			stopLoop()
			if err != nil {
				t.Fatal(err)
			}
			checkOtherWork(t, c, p == IPTables)
			for _, ch := range c.Changes {
				us, ok := ch.LatencyUS[prober.Name]
				if !ok || us < 0 || us > pace.ChangeTimeout.Microseconds() {
					t.Errorf("change %d (%s): latency %d µs (applied %v, shown before its write on %v) on %s", ch.Seq, ch.Kind, us, ok, ch.ShownBefore, prober.Name)
				}
			}
			if len(c.Changes) != 10 || c.Proxy != "lab provider "+p {
				t.Errorf("%d changes, proxy %q", len(c.Changes), c.Proxy)
			}
			for _, ch := range c.Changes {
				t.Logf("change %d (%s): %.1f ms", ch.Seq, ch.Kind, float64(ch.LatencyUS[prober.Name])/1000)
			}
			cfg, err := Load(st.Name)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Find(Key{VIP: DefaultFloorVIP, Port: floorPort, Proto: "udp"}) >= 0 {
				t.Error("the changed Service is still in the lab")
			}
		})
	}
}

// otherLoop starts a shell's loop at the lowest priority that is not this
// process's descendant (its parent shell exits at once: Floor runs in this
// process, whose descendants are vnetlab's own work), and returns what
// stops it, by its PID; the test's cleanup stops it too.
func otherLoop(t *testing.T) func() {
	t.Helper()
	out, err := exec.Command("sh", "-c", `nice -n 19 sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!`).Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("the loop's PID %q: %v", out, err)
	}
	stop := func() { _ = unix.Kill(pid, unix.SIGKILL) }
	t.Cleanup(stop)
	return stop
}

// checkOtherWork: the machine's other work was measured over the changes,
// without vnetlab's processes; with a shell looping beside them (loop),
// the shell is the busiest and every change is flagged as disturbed.
func checkOtherWork(t *testing.T, c *converge.Run, loop bool) {
	t.Helper()
	o := c.OtherWork
	if o == nil || len(o.Samples) == 0 {
		t.Fatalf("no other work measured: %+v", o)
	}
	secs := float64(o.Samples[len(o.Samples)-1].End-o.Samples[0].Start) / 1e9
	t.Logf("other work in the changes: %.2f CPU s of %.1f s, top %v", o.Phases[results.PhaseChanges], secs, o.Top)
	for _, n := range o.Top {
		if n.Name == "vnetlab" || n.Name == "labservice.test" {
			t.Errorf("vnetlab's own %s counted as other work (%.2f s)", n.Name, n.CPUSeconds)
		}
	}
	if !loop {
		return
	}
	// The shell is named with the CPU it took (first, unless some other
	// process of this machine was busier still; not always most of a CPU:
	// `make test` builds at the same lowest priority beside the tests).
	shell := slices.IndexFunc(o.Top, func(n converge.NamedCPU) bool { return n.Name == "sh" })
	if o.Phases[results.PhaseChanges] < 0.2*secs || shell < 0 || o.Top[shell].CPUSeconds < 0.05*secs {
		t.Errorf("other work %.1f CPU s in the changes' %.1f s, busiest %v, while a shell looped beside them", o.Phases[results.PhaseChanges], secs, o.Top)
	}
	// What the report flags reads the file: the changes and samples as
	// it records them.
	f := &results.Convergence{OtherWork: &results.OtherWork{}}
	for _, s := range o.Samples {
		f.OtherWork.Samples = append(f.OtherWork.Samples, results.OtherWorkSample(s))
	}
	for _, ch := range c.Changes {
		f.Changes = append(f.Changes, results.Change{Seq: ch.Seq, Written: ch.Written, LatencyUS: ch.LatencyUS})
	}
	if d := analysis.Disturbed(f); len(d) != len(c.Changes) {
		t.Errorf("%d of %d changes flagged as disturbed, want all", len(d), len(c.Changes))
	}
}

// The probe's resolution in a lab: a prober in one pod (vnetlab kube
// probe, as svc converge and kube converge run it) probes a UDP port of
// another pod, which refuses until a server binds it at a known instant;
// the first transition to the server's answer is the first probe sent
// after the bind: within one probe interval of the instant (with the
// scheduler's slack on a loaded 2-vCPU machine), never earlier than one
// interval before it.
func TestProbeResolutionInLab(t *testing.T) {
	requireRoot(t)
	self := os.Getenv("VNETLAB_BIN")
	if self == "" {
		t.Skip("the prober is vnetlab kube probe: set VNETLAB_BIN (make test does)")
	}
	st := newLab(t, "svpr", "veth-routed", 2, nil)
	srvPod, probePod := st.Pods[0], st.Pods[1]
	const port, interval = 5300, time.Millisecond
	target := netip.AddrPortFrom(netip.MustParseAddr(srvPod.IP), port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := proc.Command(ctx, probePod.NS, self, "kube", "probe", "--node", probePod.Name, "--target", target.String(),
		"--interval", interval.String(), "--timeout", "50ms")
	out, err := p.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Process.Kill(); _ = p.Wait() }()
	lines := make(chan converge.Transition, 1024)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var tr converge.Transition
			if json.Unmarshal(sc.Bytes(), &tr) == nil && tr.Event != converge.EventHeld { // changes only
				lines <- tr
			}
		}
		close(lines)
	}()
	next := func() converge.Transition {
		select {
		case tr, ok := <-lines:
			if !ok {
				t.Fatal("the prober ended")
			}
			return tr
		case <-time.After(10 * time.Second):
			t.Fatal("no transition within 10 s")
		}
		return converge.Transition{}
	}
	// Nothing is bound yet: refused. Before that the first probes may go
	// unanswered within the timeout, while the prober's neighbour entry
	// for the fresh pod resolves (CI saw it on a loaded machine).
	first := next()
	for first.Answer == converge.Silent {
		first = next()
	}
	if first.Answer != converge.Refused {
		t.Fatalf("first answer %+v, want refused (nothing bound yet)", first)
	}
	time.Sleep(200 * time.Millisecond)
	var srv *net.UDPConn
	var change time.Time
	err = nsutil.Do(srvPod.NS, func() error {
		var err error
		change = time.Now()
		srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(target))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := srv.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDP([]byte("srv\n"), from)
		}
	}()
	// Until the bind, probes are refused, or silent once the pod's kernel
	// rate-limits its ICMP errors (6 at once, then 1 a second: a loopback
	// test never sees it); the first answer is what counts.
	seen := next()
	for seen.Answer == converge.Refused || seen.Answer == converge.Silent {
		seen = next()
	}
	if seen.Answer != "srv" {
		t.Fatalf("transition %+v, want srv's answer", seen)
	}
	lag := time.Duration(seen.Sent - change.UnixNano())
	t.Logf("the bind seen by probe %d, %s after it (interval %s)", seen.Seq, lag, interval)
	if lag < -interval || lag > 50*interval {
		t.Errorf("seen %s after the bind: want within the probe interval (%s, with slack)", lag, interval)
	}
}

// The probers' flows' conntrack timeout (converge.LimitFlows) on a real
// lab's node. A node that tracks no flows is left alone (the table would
// start tracking them). Once it tracks them (a rule matching a ct state,
// as a cluster node's kubelet and kube-proxy load), UDP datagrams from
// the prober pod, forwarded by the node, make entries that end within the
// timeout given (1 s), while another pod's keep the kernel's (30 s); both
// families' rules load; undoing it leaves no table.
func TestProbeFlowTimeout(t *testing.T) {
	requireRoot(t)
	st := newLab(t, "svct", "veth-routed", 3, nil)
	node := st.Nodes[0].NS
	server, other, prober := st.Pods[0], st.Pods[1], st.Pods[2]
	// The IPv6 part loads too.
	addrs := []netip.Addr{netip.MustParseAddr(prober.IP), netip.MustParseAddr("fd00:99::2")}
	hasTable := func() bool {
		return proc.Command(context.Background(), node, "nft", "list", "table", "inet", converge.FlowTable).Run() == nil
	}
	limit := func() func() error {
		undo, err := converge.LimitFlows([]string{node}, addrs, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = undo() })
		return undo
	}
	limit()
	if hasTable() {
		t.Fatalf("table %s loaded on a node that tracked no flows", converge.FlowTable)
	}
	send := func(from lab.PodState) error {
		return nsutil.Do(from.NS, func() error {
			c, err := net.Dial("udp4", net.JoinHostPort(server.IP, "9"))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("probe"))
			return err
		})
	}
	if err := proc.Nft(node, "table ip svct_ct {\n\tchain svct { type filter hook forward priority filter; ct state new counter; }\n}\n"); err != nil {
		t.Fatal(err)
	}
	// The node tracks a flow once the first datagram crossed it (its
	// ARP resolved first).
	tracked := func() bool {
		n, err := converge.ConntrackEntries(node)
		return err == nil && n > 0
	}
	for deadline := time.Now().Add(10 * time.Second); !tracked() && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := send(other); err != nil {
			t.Fatal(err)
		}
	}
	undo := limit()
	if !hasTable() {
		t.Fatalf("no table %s on a node tracking flows", converge.FlowTable)
	}
	// The entries by source pod: the largest timeout left of each.
	left := func() (map[string]uint32, error) {
		var flows []*netlink.ConntrackFlow
		err := nsutil.Do(node, func() (err error) {
			flows, err = netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
			return err
		})
		out := map[string]uint32{}
		for _, f := range flows {
			if f.Forward.Protocol != unix.IPPROTO_UDP {
				continue
			}
			for _, p := range []lab.PodState{other, prober} {
				if f.Forward.SrcIP.String() == p.IP {
					out[p.Name] = max(out[p.Name], f.TimeOut)
				}
			}
		}
		return out, err
	}
	var seen map[string]uint32
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, p := range []lab.PodState{other, prober} {
			if err := send(p); err != nil {
				t.Fatalf("send from %s: %v", p.Name, err)
			}
		}
		if seen, err = left(); err != nil {
			t.Fatal(err)
		}
		if len(seen) == 2 {
			break
		}
	}
	t.Logf("seconds left on the node's UDP entries, by source pod: %v", seen)
	switch {
	case len(seen) != 2:
		t.Fatalf("the node holds entries from %v, want from %s and %s", seen, other.Name, prober.Name)
	case seen[prober.Name] > 1:
		t.Errorf("the prober's flow has %d s left, want at most the 1 s given", seen[prober.Name])
	case seen[other.Name] < 20:
		t.Errorf("another pod's flow has %d s left, want the kernel's (30 s)", seen[other.Name])
	}
	if err := undo(); err != nil {
		t.Fatal(err)
	}
	if hasTable() {
		t.Errorf("table %s is still on the node after the undo", converge.FlowTable)
	}
}

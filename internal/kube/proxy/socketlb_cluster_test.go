package proxy_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// vnetlab-ebpf --socket-lb (this file's tests run last: the cluster is
// replaced once more). A pod's TCP connections to a Service are
// translated at connect() by the socket programs on the node's cgroup:
// their counter rises and the tc programs translate no packet of them;
// hairpin works. What only the tc programs do as Kubernetes defines it
// stays theirs: a connected UDP socket (its flow must be able to move
// when its backend goes), a Service without endpoints refuses with
// ECONNREFUSED from the ICMP port unreachable of kube-proxy's REJECT,
// sessionAffinity ClientIP pins a client to one backend.
func TestSocketLB(t *testing.T) {
	cs := needProxy(t, modeSocketLB)
	ns := kns(t, cs)
	ips := runPods(t, cs, ns, whoamiPod("srv", 2, map[string]string{"app": "srv"}), clientPod("cli", 1))
	vip := whoamiService(t, cs, ns, "srv")
	cli := podNetns(t, ips["cli"])
	tcStats := func() tcbpf.Stats {
		t.Helper()
		st, err := plane(t, 1).Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sockBefore, tcBefore := sockStats(t, 1), tcStats()
	mustWho(t, cli, "tcp", hostport(vip, 80), "srv", 10*time.Second)
	mustWho(t, podNetns(t, ips["srv"]), "tcp", hostport(vip, 81), "srv", 10*time.Second) // hairpin (node 2)
	sockAfter, tcAfter := sockStats(t, 1), tcStats()
	if sockAfter.Connects < sockBefore.Connects+1 {
		t.Errorf("node 1's socket programs translated %d connects of pod cli (TCP), want >= 1", sockAfter.Connects-sockBefore.Connects)
	}
	if tcAfter.DNAT != tcBefore.DNAT {
		t.Errorf("node 1's tc programs translated %d packets of connections the socket programs had translated", tcAfter.DNAT-tcBefore.DNAT)
	}
	// A connected UDP socket is tc's: its flow can then move to a live
	// backend when its own goes (kube-proxy's conntrack cleanup).
	mustWho(t, cli, "udp", hostport(vip, 80), "srv", 10*time.Second)
	if st := sockStats(t, 1); st.Connects != sockAfter.Connects {
		t.Errorf("node 1's socket programs translated %d connects of a connected UDP socket, want none", st.Connects-sockAfter.Connects)
	}
	if st := tcStats(); st.DNAT <= tcAfter.DNAT {
		t.Errorf("node 1's tc programs translated no packet of pod cli's connected UDP socket")
	}
	sockAfter, tcAfter = sockStats(t, 1), tcStats()

	nobody := whoamiService(t, cs, ns, "nobody")
	if err := waitFor(10*time.Second, func() bool { _, ok := entry(t, plane(t, 1), nobody, 80, tcbpf.TCP); return ok }); err != nil {
		t.Fatal("the Service without endpoints never reached node 1's maps")
	}
	start := time.Now()
	if got, err := who(cli, "tcp", hostport(nobody, 80)); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("pod cli -> a Service without endpoints: %q, %v; want connection refused (the tc programs' reject)", got, err)
	}
	t.Logf("a Service without endpoints: refused after %s (including the client process's start)", time.Since(start).Round(time.Millisecond))
	if st := sockStats(t, 1); st.NoBackend != sockAfter.NoBackend {
		t.Errorf("the socket programs refused %d connects: a pod's Service without endpoints is the tc programs'", st.NoBackend-sockAfter.NoBackend)
	}
	if st := tcStats(); st.Rejects <= tcAfter.Rejects {
		t.Errorf("node 1's tc programs rejected nothing (%d before, %d after)", tcAfter.Rejects, st.Rejects)
	}

	tcBefore = tcStats()
	sessionAffinityClientIP(t, cs, "")
	if st := tcStats(); st.NewFlows < tcBefore.NewFlows+20 {
		t.Errorf("node 1's tc programs picked a backend for %d flows during the sessionAffinity test, want >= 20 (its affinity connections are theirs)", st.NewFlows-tcBefore.NewFlows)
	}
}

// --socket-lb and a backend leaving: a pod's connected UDP socket is tc's,
// whose conntrack entry the proxy forgets; the outside client's flow is
// the NodePort programs'. Both move to the live backend.
func TestUDPFlowMovesWithSocketLB(t *testing.T) {
	udpFlowMoves(t, needProxy(t, modeSocketLB), true, true)
}

// --socket-lb on its dual-stack cluster: IPv6 Services through the socket
// programs, and none of those connections translated again by tc's IPv6
// programs.
func TestSocketLBIPv6(t *testing.T) {
	cs := needProxy(t, modeSocketLB)
	before, err := plane(t, 1).Stats6()
	if err != nil {
		t.Fatal(err)
	}
	ipv6ThroughSockets(t, cs)
	after, err := plane(t, 1).Stats6()
	if err != nil {
		t.Fatal(err)
	}
	if after.DNAT != before.DNAT {
		t.Errorf("node 1's tc IPv6 programs translated %d packets of connections the socket programs had translated", after.DNAT-before.DNAT)
	}
}

package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Cross-host modes (--nodes 2): pod-a on node1, pod-b on node2; connectivity
// over the underlay, and traffic takes the mode's path.
func TestCrossHostModes(t *testing.T) {
	for _, mode := range []string{"bridge", "host-gw", "vxlan"} {
		t.Run(mode, func(t *testing.T) {
			name := "e2x-" + strings.ReplaceAll(mode, "-", "")
			up(t, name, "--mode", mode, "--nodes", "2", "--underlay-rate", "10gbit")
			l := lsLab(t, name)
			ls := must(t, "ls", name).stdout
			if !strings.Contains(ls, "on node1") || !strings.Contains(ls, "on node2") {
				t.Errorf("pods are not spread over node1 and node2:\n%s", ls)
			}
			ping(t, name, "pod-b", l.Pods[0].IP)
			// The underlay carries the traffic (and is shaped by tbf).
			q := must(t, "exec", name, "node1", "--", "tc", "qdisc", "show", "dev", "eth1").stdout
			if !strings.Contains(q, "tbf") || !strings.Contains(q, "10Gbit") {
				t.Errorf("underlay qdisc: %q", q)
			}
			if tx := txPackets(t, name, "node2", "eth1"); tx < 2 {
				t.Errorf("node2's underlay sent %d packets: traffic did not cross it", tx)
			}
			if mode == "vxlan" {
				if tx := txPackets(t, name, "node2", "flannel.1"); tx < 2 {
					t.Errorf("flannel.1 sent %d packets: the overlay was bypassed", tx)
				}
			}
		})
	}
	r := must(t, "run", "--nodes", "2", "--modes", "host,bridge,host-gw,vxlan", "--duration", "1s", "--repeat", "1", "--tests", "tcp_stream")
	if strings.Contains(r.stdout, "FAILED") {
		t.Errorf("a cross-host stream failed:\n%s\n%s", r.stdout, r.stderr)
	}
}

var txRE = regexp.MustCompile(`TX:[^\n]*\n\s*(\d+)\s+(\d+)`)

func txPackets(t *testing.T, lab, who, dev string) int {
	t.Helper()
	out := must(t, "exec", lab, who, "--", "ip", "-s", "link", "show", dev).stdout
	m := txRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no TX counters in:\n%s", out)
	}
	n, _ := strconv.Atoi(m[2])
	return n
}

func TestCrossHostBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"up", "--name", "e2bad", "--mode", "veth-routed", "--nodes", "2"}, "mode veth-routed is same-host only: --nodes 2 works with"},
		{[]string{"up", "--name", "e2bad", "--mode", "vxlan"}, "mode vxlan joins nodes: use --nodes 2"},
		{[]string{"up", "--name", "e2bad", "--mode", "bridge", "--nodes", "3"}, "a lab has 1 or 2 nodes"},
		{[]string{"up", "--name", "e2bad", "--mode", "bridge", "--underlay-rate", "10gbit"}, "it needs --nodes 2"},
		{[]string{"up", "--name", "e2bad", "--mode", "vxlan", "--nodes", "2", "--underlay-rate", "fast"}, `underlay rate "fast"`},
	} {
		r := vnetlab(t, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
		assertGone(t, "e2bad")
	}
}

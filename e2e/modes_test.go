package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

type labJSON struct {
	Name    string `json:"name"`
	Gateway string `json:"gateway"`
	Nodes   []struct {
		IP string `json:"ip"`
	} `json:"nodes"`
	Pods []struct {
		Name string `json:"name"`
		IP   string `json:"ip"`
	} `json:"pods"`
	Facts map[string]string `json:"facts"`
}

func lsLab(t *testing.T, name string) labJSON {
	t.Helper()
	var labs []labJSON
	if err := json.Unmarshal([]byte(must(t, "ls", name, "-o", "json").stdout), &labs); err != nil || len(labs) != 1 {
		t.Fatalf("ls -o json: %v", err)
	}
	return labs[0]
}

func ping(t *testing.T, lab, from, to string) {
	t.Helper()
	r := vnetlab(t, "exec", lab, from, "--", "ping", "-c", "2", "-i", "0.2", "-W", "2", to)
	if r.code != 0 || !strings.Contains(r.stdout, " 0% packet loss") {
		t.Errorf("ping %s -> %s failed (exit %d):\n%s%s", from, to, r.code, r.stdout, r.stderr)
	}
}

// Each same-host mode: built for real, pod-to-pod and pod-to-gateway
// connectivity, a short iperf3 stream through `run`, and nothing left after down.
func TestModesConnectivityAndStream(t *testing.T) {
	for _, mode := range []string{"veth-routed", "bridge", "macvlan", "docker-nat"} {
		t.Run(mode, func(t *testing.T) {
			name := "e2m-" + strings.Split(mode, "-")[0]
			up(t, name, "--mode", mode)
			l := lsLab(t, name)
			if len(l.Pods) != 2 || l.Pods[0].IP != "192.168.10.10" || l.Pods[1].IP != "192.168.10.11" {
				t.Fatalf("default pods: %+v", l.Pods)
			}
			ping(t, name, "pod-b", "192.168.10.10")
			ping(t, name, "pod-a", "192.168.10.11")
			if mode == "veth-routed" {
				// 169.254.10.24 exists only as an ARP answer (proxy_arp), as in the
				// seed and Calico: prove it resolves to the node's veth, and that the
				// node is reachable through it.
				ping(t, name, "pod-b", l.Nodes[0].IP)
				neigh := must(t, "exec", name, "pod-b", "--", "ip", "neigh", "show", "169.254.10.24").stdout
				// (/sys is the root namespace's: ask netlink through ip instead.)
				f := strings.Fields(must(t, "exec", name, "node", "--", "ip", "-br", "link", "show", "veth-pod-b").stdout)
				if len(f) < 3 {
					t.Fatalf("ip -br link: %v", f)
				}
				mac := f[2]
				if !strings.Contains(neigh, mac) {
					t.Errorf("gateway 169.254.10.24 resolves to %q, want the node veth's MAC %q", neigh, mac)
				}
			} else {
				ping(t, name, "pod-b", l.Gateway)
			}
			// The node's uplink and the "outside": pods reach the ext namespace.
			ping(t, name, "pod-a", "10.10.0.1")
			must(t, "down", name)
			assertGone(t, name)
		})
	}
	r := must(t, "run", "--modes", "host,veth-routed,bridge,macvlan,docker-nat", "--tests", "tcp_stream", "--duration", "1s", "--repeat", "1", "-o", t.TempDir()+"/r.json")
	for _, mode := range []string{"host", "veth-routed", "bridge", "macvlan", "docker-nat"} {
		if !strings.Contains(r.stdout, mode) {
			t.Errorf("run table has no row for %s:\n%s", mode, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "FAILED") {
		t.Errorf("a stream failed:\n%s\n%s", r.stdout, r.stderr)
	}
}

// Docker's published port is reachable from another host (the ext namespace),
// from the node's 127.0.0.1, and from another container via the node IP.
func TestDockerNATPublishedPaths(t *testing.T) {
	r := must(t, "run", "--modes", "docker-nat", "--paths", "pod,published,published-local,published-hairpin", "--tests", "tcp_stream", "--duration", "1s", "--repeat", "1")
	for _, p := range []string{"published", "published-local", "published-hairpin"} {
		if !strings.Contains(r.stdout, p) {
			t.Errorf("no row for path %s:\n%s", p, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "FAILED") {
		t.Errorf("a published path failed:\n%s\n%s", r.stdout, r.stderr)
	}
}

func TestBridgeNfCallOption(t *testing.T) {
	up(t, "e2nf", "--mode", "bridge", "--option", "bridge_nf_call_iptables=off")
	v := strings.TrimSpace(must(t, "exec", "e2nf", "node", "--", "cat", "/proc/sys/net/bridge/bridge-nf-call-iptables").stdout)
	if v != "0" {
		t.Errorf("bridge-nf-call-iptables in the node = %q, want 0", v)
	}
	ping(t, "e2nf", "pod-b", "192.168.10.10")
}

func TestIpvlanKnownButGated(t *testing.T) {
	m, ok := doctorModes(t)["ipvlan"]
	if !ok {
		t.Fatal("doctor does not list ipvlan")
	}
	if m.Available {
		// A kernel with ipvlan: the mode must work for real.
		up(t, "e2ipv", "--mode", "ipvlan")
		ping(t, "e2ipv", "pod-b", "192.168.10.10")
		return
	}
	if kernel.InGuest() {
		t.Fatalf("the guest kernel has ipvlan, doctor says: %s", m.Detail)
	}
	if !strings.Contains(m.Detail, "kernel has no ipvlan support (CONFIG_IPVLAN)") {
		t.Errorf("doctor's reason for ipvlan: %q", m.Detail)
	}
	r := vnetlab(t, "up", "--name", "e2ipv", "--mode", "ipvlan")
	if r.code == 0 || !strings.Contains(r.stderr, "kernel has no ipvlan support (CONFIG_IPVLAN)") {
		t.Errorf("up --mode ipvlan: exit %d, stderr %q", r.code, r.stderr)
	}
	assertGone(t, "e2ipv")
}

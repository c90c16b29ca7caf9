package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/platform/labservice"
)

// svc and ep through the real binary on a real lab: bad input gets one line
// on stderr and a non-zero exit, and leaves the lab's services unchanged.
func TestSvcEpCLI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds network namespaces")
	}
	bin := vnetlabBin(t)
	const lab = "sv-cli"
	runVnetlab(t, bin, "down", lab) // a previous run killed halfway
	if _, e, code := runVnetlab(t, bin, "up", "--name", lab, "--mode", "veth-routed", "--provider", "iptables"); code != 0 {
		t.Fatalf("up: %s", e)
	}
	t.Cleanup(func() {
		if _, e, code := runVnetlab(t, bin, "down", lab); code != 0 {
			t.Errorf("down: %s", e)
		}
	})
	count := func() int {
		o, e, code := runVnetlab(t, bin, "svc", "ls", lab, "-o", "json")
		if code != 0 {
			t.Fatalf("svc ls: %s", e)
		}
		var c labservice.Config
		if err := json.Unmarshal([]byte(o), &c); err != nil {
			t.Fatalf("svc ls -o json: %v\n%s", err, o)
		}
		return len(c.Services)
	}
	if n := count(); n != 6 {
		t.Fatalf("up --provider loaded %d services, want 6 (3 engine ports x tcp/udp)", n)
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"svc", "add", lab, "--service", "10.96.0.300:80", "--backend", "pod-a"}, "not an IPv4 or IPv6 address"},
		{[]string{"svc", "add", lab, "--service", "10.96.0.1:70000", "--backend", "pod-a"}, "1 to 65535"},
		{[]string{"svc", "add", lab, "--service", "10.96.0.1:80/sctp", "--backend", "pod-a"}, "unknown protocol"},
		{[]string{"svc", "add", lab, "--service", "10.96.0.1:80", "--backend", "192.168.10.10:0"}, "1 to 65535"},
		{[]string{"svc", "add", lab, "--service", "10.96.0.1:80", "--backend", "8.8.8.8:53"}, "not a pod of lab"},
		{[]string{"svc", "add", lab, "--service", "10.96.0.1:80"}, "no --backend"},
		{[]string{"svc", "add", lab, "--service", "10.96.0.100:5201", "--backend", "pod-a"}, "already exists"},
		{[]string{"svc", "add", lab, "--service", "192.168.10.99:80", "--backend", "pod-a"}, "inside the pod network"},
		{[]string{"svc", "add", lab, "--service", "10.96.0.1:80", "--backend", "pod-a", "--provider", "nftables"}, "realised by iptables"},
		{[]string{"svc", "add", lab, "--service", "10.96.0.1:80", "--backend", "pod-a", "--provider", "ipvs"}, "unknown provider"},
		{[]string{"svc", "add", "sv-nolab", "--service", "10.96.0.1:80", "--backend", "pod-a"}, "no lab named"},
		{[]string{"svc", "ls", "sv-nolab"}, "no lab named"},
		{[]string{"svc", "ls", lab, "-o", "yaml"}, "want table or json"},
		{[]string{"svc", "stats", lab}, "has no eBPF programs, so no counters: they come with --provider ebpf or ebpf-sock"},
		{[]string{"svc", "stats", "sv-nolab"}, "no lab named"},
		{[]string{"svc", "del", lab, "--service", "10.96.0.100:9999"}, "no service"},
		{[]string{"svc", "del", lab, "--service", "10.96.0.100:5201/sctp"}, "unknown protocol"},
		{[]string{"ep", "add", lab, "--pod", "pod-a"}, "needs no endpoints"},
		{[]string{"ep", "add", lab}, "say which pod"},
		{[]string{"ep", "add", lab, "--netns", "/var/run/netns/x"}, "--netns needs --ifname"},
		{[]string{"ep", "add", lab, "--pod", "pod-a", "--placement", "host"}, "want pod or node"},
		{[]string{"ep", "ls", "sv-nolab"}, "no lab named"},
		{[]string{"up", "--name", "sv-cli2", "--mode", "host", "--provider", "iptables"}, "has no pods"},
		{[]string{"up", "--name", "sv-cli2", "--mode", "veth-routed", "--extra-services", "10"}, "need a provider"},
		{[]string{"run", "--modes", "veth-routed", "--providers", "nftables"}, "--paths pod,service"},
		{[]string{"run", "--modes", "veth-routed", "--paths", "pod,service", "--extra-services", "-1"}, "want 0 to"},
	}
	for _, b := range bad {
		_, e, code := runVnetlab(t, bin, b.args...)
		lines := strings.Split(strings.TrimSpace(e), "\n")
		if code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "vnetlab: ") || !strings.Contains(e, b.want) {
			t.Errorf("vnetlab %s: exit %d, stderr %q; want one line naming %q and a non-zero exit", strings.Join(b.args, " "), code, e, b.want)
		}
	}
	if n := count(); n != 6 {
		t.Errorf("bad input changed the lab's services: %d, want 6", n)
	}
	if _, err := os.Stat("/run/netns/vnl-sv-cli2-node"); err == nil {
		t.Error("a refused `up` left a lab behind")
	}

	o, e, code := runVnetlab(t, bin, "svc", "add", lab, "--service", "10.96.0.150:80/udp", "--backend", "pod-a:5201", "--backend", "192.168.10.11:5201")
	if code != 0 || !strings.Contains(o, "10.96.0.150:80/udp -> 192.168.10.10:5201 (pod-a), 192.168.10.11:5201 (pod-b) added") {
		t.Errorf("svc add: %s%s", o, e)
	}
	o, _, _ = runVnetlab(t, bin, "svc", "ls", lab)
	if !strings.Contains(o, "10.96.0.150") || !strings.Contains(o, "provider iptables") {
		t.Errorf("svc ls:\n%s", o)
	}
	if _, e, code := runVnetlab(t, bin, "svc", "del", lab, "--service", "10.96.0.150:80/udp"); code != 0 {
		t.Errorf("svc del: %s", e)
	}
	if n := count(); n != 6 {
		t.Errorf("after add and del: %d services, want 6", n)
	}
}

// With the ebpf provider a Service may have no backends, as in Kubernetes:
// its clients are refused at once (the programs' ICMP port unreachable).
func TestSvcWithoutBackendsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds network namespaces")
	}
	bin := vnetlabBin(t)
	const lab = "sv-rej"
	runVnetlab(t, bin, "down", lab) // a previous run killed halfway
	if _, e, code := runVnetlab(t, bin, "up", "--name", lab, "--mode", "veth-ebpf", "--provider", "ebpf"); code != 0 {
		t.Fatalf("up: %s", e)
	}
	t.Cleanup(func() {
		if _, e, code := runVnetlab(t, bin, "down", lab); code != 0 {
			t.Errorf("down: %s", e)
		}
	})
	o, e, code := runVnetlab(t, bin, "svc", "add", lab, "--service", "10.96.0.9:80")
	if code != 0 || !strings.Contains(o, "10.96.0.9:80/tcp added without backends") {
		t.Fatalf("svc add without --backend on the ebpf provider: exit %d: %s%s", code, o, e)
	}
	start := time.Now()
	_, e, code = runVnetlab(t, bin, "exec", lab, "pod-b", "--", "bash", "-c", "exec 3<>/dev/tcp/10.96.0.9/80")
	took := time.Since(start)
	if code == 0 || !strings.Contains(e, "Connection refused") {
		t.Fatalf("connect to a Service without backends: exit %d, stderr %q; want connection refused", code, e)
	}
	if took > 5*time.Second {
		t.Fatalf("refused after %s (the vnetlab exec included): want at once", took)
	}
	// svc stats: the refusal was the programs' (read from the pinned maps).
	o, e, code = runVnetlab(t, bin, "svc", "stats", lab, "-o", "json")
	var c labservice.Counters
	if err := json.Unmarshal([]byte(o), &c); code != 0 || err != nil {
		t.Fatalf("svc stats -o json: exit %d, %v: %s%s", code, err, o, e)
	}
	if c.Lab != lab || c.TC.IPv4.Rejects < 1 || c.TC.IPv4.Errors != 0 || c.Socket != nil {
		t.Errorf("svc stats: %+v; want the refusal counted (no_backend_rejects >= 1), no rewrite errors, no socket programs", c)
	}
	if o, _, _ := runVnetlab(t, bin, "svc", "stats", lab); !strings.Contains(o, "no backend: refused (ICMP port unreachable)") || !strings.Contains(o, "host routing:") {
		t.Errorf("svc stats table:\n%s", o)
	}
	if _, e, code := runVnetlab(t, bin, "svc", "stats", lab, "-o", "yaml"); code == 0 || !strings.Contains(e, "want table or json") {
		t.Errorf("svc stats -o yaml: exit %d, %s", code, e)
	}
	if _, e, code := runVnetlab(t, bin, "svc", "add", lab, "--service", "10.96.0.9:81", "--backend", "pod-a:5201"); code != 0 {
		t.Fatalf("svc add with a backend: %s", e)
	}
}

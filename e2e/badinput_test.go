package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input: one clear line on stderr, a non-zero exit, no panic, and nothing
// half-built (no namespace, no state directory).
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	malformed := write("bad.yaml", "name: e2bad\nmode: bridge\npods: [\n")
	unknownField := write("field.yaml", "name: e2bad\nmode: bridge\npodz: 3\n")
	unknownMode := write("mode.yaml", "name: e2bad\n\nmode: warp-drive\n")
	clash := write("clash.yaml", "name: e2bad\nmode: bridge\npods:\n  - {name: pod-a, ip: 192.168.10.10}\n  - {name: pod-b, ip: 192.168.10.10}\n")

	cases := []struct {
		name string
		env  []string
		args []string
		want string // substring of the one-line error
	}{
		{"malformed yaml", nil, []string{"up", "-f", malformed}, "bad.yaml:"},
		{"unknown yaml field", nil, []string{"up", "-f", unknownField}, `field.yaml:3: unknown field "podz"`},
		{"unknown mode in yaml", nil, []string{"up", "-f", unknownMode}, `mode.yaml:3: field mode: unknown mode "warp-drive"`},
		{"unknown mode", nil, []string{"up", "--name", "e2bad", "--mode", "warp-drive"}, `unknown mode "warp-drive" (known:`},
		{"long name", nil, []string{"up", "--name", "a-very-long-lab-name", "--mode", "bridge"}, "is 20 characters; the limit is 15"},
		{"negative pods", nil, []string{"up", "--name", "e2bad", "--mode", "bridge", "--pods", "-1"}, "pod count -1 is negative"},
		{"address clash", nil, []string{"up", "-f", clash}, "address clash: pods pod-a and pod-b both have 192.168.10.10"},
		{"gateway clash", nil, []string{"up", "--name", "e2bad", "--mode", "bridge", "--pod-cidr", "10.10.0.0/16"}, "address clash: pod_cidr 10.10.0.0/16 overlaps"},
		{"too many pods", nil, []string{"up", "--name", "e2bad", "--mode", "bridge", "--pods", "300"}, "300 pods do not fit in 192.168.10.0/24"},
		{"bridge port limit", nil, []string{"up", "--name", "e2bad", "--mode", "bridge", "--pods", "1025", "--pod-cidr", "10.128.0.0/16"}, "mode bridge holds at most 1024 pods here, not 1025: each pod is a port of the Linux bridge br0, which holds at most 1024 ports"},
		{"unknown option", nil, []string{"up", "--name", "e2bad", "--mode", "bridge", "--option", "nope=1"}, `mode bridge has no option "nope"`},
		{"bad option value", nil, []string{"up", "--name", "e2bad", "--mode", "bridge", "--option", "bridge_nf_call_iptables=maybe"}, "want on or off"},
		{"down unknown lab", nil, []string{"down", "e2nosuch"}, `no lab named "e2nosuch"`},
		{"exec unknown pod", nil, []string{"exec", "e2nosuch", "pod-a", "--", "true"}, `no lab named "e2nosuch"`},
		{"unknown test", nil, []string{"run", "--modes", "host", "--tests", "tcp_bogus"}, `unknown test "tcp_bogus"`},
		{"missing iperf3", []string{"PATH=/nonexistent"}, []string{"run", "--modes", "host", "--duration", "1s", "--repeat", "1"}, "iperf3 is not installed"},
		{"bad repeat", nil, []string{"run", "--modes", "host", "--repeat", "0"}, "repeat must be 1 or more"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(namespacesWithPrefix("vnl-run"))
			r := vnetlabEnv(t, c.env, c.args...)
			if r.code == 0 {
				t.Fatalf("exit 0; stdout %q", r.stdout)
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
				t.Fatalf("panicked:\n%s", r.stderr)
			}
			msg := strings.TrimSpace(r.stderr)
			if strings.Count(msg, "\n") != 0 {
				t.Errorf("want one line on stderr, got:\n%s", msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("stderr %q does not contain %q", msg, c.want)
			}
			assertGone(t, "e2bad")
			if ns := namespacesWithPrefix("vnl-run"); len(ns) > before {
				t.Errorf("run left namespaces: %v", ns)
			}
		})
	}
}

func TestDuplicateNameAndConcurrentLabs(t *testing.T) {
	up(t, "e2dup", "--mode", "bridge")
	up(t, "e2two", "--mode", "veth-routed") // a second lab at the same time
	r := vnetlab(t, "up", "--name", "e2dup", "--mode", "veth-routed")
	if r.code == 0 || !strings.Contains(r.stderr, `lab "e2dup" already exists`) {
		t.Fatalf("duplicate name: exit %d stderr %q", r.code, r.stderr)
	}
	// The refused `up` must not have damaged the existing lab.
	ping(t, "e2dup", "pod-b", "192.168.10.10")
	ping(t, "e2two", "pod-b", "192.168.10.10")
	ls := must(t, "ls").stdout
	if !strings.Contains(ls, "e2dup") || !strings.Contains(ls, "e2two") {
		t.Errorf("ls does not show both labs:\n%s", ls)
	}
}

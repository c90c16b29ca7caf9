package cluster

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/results"
)

// The daemons are told apart by their command lines, as the cluster
// starts them.
func TestDaemonOf(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
		ok   bool
	}{
		{[]string{"/usr/bin/etcd", "--name", "etcd"}, "etcd", true},
		{[]string{"/root/.cache/vnetlab/kube/v1.37.2/bin/kube-apiserver", "--etcd-servers=x"}, "kube-apiserver", true},
		{[]string{"/c/bin/kube-proxy", "--config", "/var/lib/vnetlab/k/k-node2/kube-proxy.yaml"}, "k-node2 proxy", true},
		{[]string{"/usr/bin/vnetlab", "kube-proxy", "--kubeconfig", "f", "--node", "k-node1", "--netns", "n"}, "k-node1 proxy", true},
		{[]string{"/usr/bin/vnetlab", "kube-netpol", "--kubeconfig", "f", "--node", "k-node3"}, "k-node3 netpol", true},
		{[]string{"/usr/local/bin/kube-router", "--run-firewall=true"}, "netpol", true},
		{[]string{"/usr/bin/vnetlab", "kube", "forward"}, "", false},
		{[]string{"/c/bin/kubelet"}, "", false},
	} {
		d, ok := daemonOf(c.argv)
		if ok != c.ok || ok && d.Name() != c.want {
			t.Errorf("%v: %q (%v), want %q (%v)", c.argv, d.Name(), ok, c.want, c.ok)
		}
	}
}

// A Cilium agent, started as the cluster starts it, is its node's proxy
// with its kube-proxy replacement and its policy controller unless
// enforcement is off; nothing else is an agent.
func TestCiliumRoles(t *testing.T) {
	n := node{name: "k-node1", dir: "/run/vnetlab/labs/k/k-node1"}
	agent := func(kpr, policy bool) []string {
		return append([]string{"/root/.cache/vnetlab/kube/cilium/v/bin/cilium-agent"}, ciliumAgentArgs(n, "kc", kpr, policy)...)
	}
	for _, c := range []struct {
		argv []string
		want string
	}{
		{agent(true, true), "k-node1 proxy, k-node1 netpol"},
		{agent(false, true), "k-node1 netpol"},
		{agent(true, false), "k-node1 proxy"},
		{agent(false, false), ""},
		{[]string{"/c/bin/kube-proxy", "--config", "/var/lib/vnetlab/k/k-node1/kube-proxy.yaml"}, ""},
		{nil, ""},
	} {
		var got []string
		for _, d := range ciliumRoles(c.argv) {
			got = append(got, d.Name())
		}
		if strings.Join(got, ", ") != c.want {
			t.Errorf("%v: %q, want %q", c.argv, got, c.want)
		}
	}
}

// A plane's pinned maps are told apart by their names in bpf/ and the
// policy folder; a name of none of them is "other" (cniWithEBPFProxy
// asserts a real plane has none).
func TestMapPart(t *testing.T) {
	for rel, want := range map[string]string{
		"lb_conntrack":       results.MapPartProxy,
		"lb6_backends":       results.MapPartProxy,
		"np6_conntrack":      results.MapPartProxy,
		"sock_conns":         results.MapPartProxy,
		"host_via_stack6":    results.MapPartRouting,
		"pod_routes":         results.MapPartRouting,
		"policy/pol4_flows":  results.MapPartPolicy,
		"policy/pol_gen":     results.MapPartPolicy,
		"endpoints/whatever": results.MapPartOther,
		"uplinks":            results.MapPartOther,
	} {
		if got := mapPart(filepath.FromSlash(rel)); got != want {
			t.Errorf("%s: %q, want %q", rel, got, want)
		}
	}
}

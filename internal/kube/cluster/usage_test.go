package cluster

import (
	"path/filepath"
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

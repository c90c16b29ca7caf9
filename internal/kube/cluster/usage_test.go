package cluster

import "testing"

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
		{[]string{"/usr/bin/vnetlab", "kube", "forward"}, "", false},
		{[]string{"/c/bin/kubelet"}, "", false},
	} {
		d, ok := daemonOf(c.argv)
		if ok != c.ok || ok && d.Name() != c.want {
			t.Errorf("%v: %q (%v), want %q (%v)", c.argv, d.Name(), ok, c.want, c.ok)
		}
	}
}

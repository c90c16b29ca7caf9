package scenario

import (
	"strings"
	"testing"
)

const tableFile = `
tests: [tcp_stream, tcp_rr, tcp_crr]
repeat: 5
kube:
  paths: [pod, service]
  extra_services: 100
  clusters:
    - {name: bridge-iptables, proxy: iptables}
    - name: routed-nftables
      cluster: kr
      cni: vnetlab
      cni_mode: veth-routed
      proxy: nftables
      extra_services: 0
    - {name: bridge-ebpf, proxy: vnetlab-ebpf, nodes: 2, extra_services: 10000, socket_lb: true}
`

func TestParseKubeClusters(t *testing.T) {
	s, err := Parse("t.yaml", []byte(tableFile))
	if err != nil {
		t.Fatal(err)
	}
	k := s.Kube
	if !k.Tabled() || len(k.Clusters) != 3 {
		t.Fatalf("clusters: %+v", k.Clusters)
	}
	a, b, c := k.Clusters[0], k.Clusters[1], k.Clusters[2]
	// Defaults: cluster kt<position>, CNI bridge, 2 nodes.
	if a.Cluster != "kt1" || a.CNI != "bridge" || a.CNIMode != "" || a.Nodes != 2 || a.Proxy != "iptables" {
		t.Errorf("first: %+v", a)
	}
	if b.Cluster != "kr" || b.CNI != "vnetlab" || b.CNIMode != "veth-routed" || b.Proxy != "nftables" {
		t.Errorf("second: %+v", b)
	}
	if a.SocketLB || !c.SocketLB || !c.Spec().SocketLB {
		t.Errorf("socket_lb: %v %v (spec %v), want false true true", a.SocketLB, c.SocketLB, c.Spec().SocketLB)
	}
	if k.ExtraFor(a) != 100 || k.ExtraFor(b) != 0 || k.ExtraFor(c) != 10000 {
		t.Errorf("extra services: %d %d %d, want 100 0 10000", k.ExtraFor(a), k.ExtraFor(b), k.ExtraFor(c))
	}
	if got := k.ExtraTestList(); len(got) != 1 || got[0] != "tcp_crr" {
		t.Errorf("extra tests default: %v", got)
	}
	if sp := b.Spec(); sp.Name != "kr" || sp.Nodes != 2 || sp.CNI != "vnetlab" || sp.CNIMode != "veth-routed" || sp.Proxy != "nftables" {
		t.Errorf("spec: %+v", sp)
	}
	one, err := Parse("o.yaml", []byte("kube: {cluster: k}\n"))
	if err != nil || one.Kube.Tabled() {
		t.Errorf("a single-cluster file is not a table: %v", err)
	}
}

// Bad configurations: one line naming the file, the line and
// kube.clusters[i].FIELD.
func TestKubeClustersErrors(t *testing.T) {
	head := "kube:\n  clusters:\n"
	cases := []struct{ body, want string }{
		{head + "    - {name: a, proxy: ipvs}\n", `x.yaml:3: field kube.clusters[0].proxy: unknown proxy "ipvs" (known: iptables, nftables, vnetlab-ebpf`},
		{head + "    - {name: a}\n    - name: b\n      cni: calico\n", `x.yaml:5: field kube.clusters[1].cni: unknown CNI "calico" (known: bridge, vnetlab, flannel, cilium)`},
		{head + "    - {name: a, cni: vnetlab, cni_mode: ovs-dpdk}\n", `x.yaml:3: field kube.clusters[0].cni_mode: cni_mode "ovs-dpdk": vnetlab's CNI plugin wires pods with`},
		{head + "    - {name: a, cni_mode: veth-routed}\n", `x.yaml:3: field kube.clusters[0].cni_mode: cni_mode veth-routed: modes are vnetlab's plugin's: add cni vnetlab`},
		{head + "    - {name: a}\n    - {name: a, proxy: nftables}\n", `x.yaml:4: field kube.clusters[1].name: "a" is also the name of kube.clusters[0]`},
		{head + "    - {name: a, cluster: k}\n    - {name: b, cluster: k}\n", `x.yaml:4: field kube.clusters[1].cluster: "k" is also kube.clusters[0]'s cluster`},
		{head + "    - {name: A/b}\n", `x.yaml:3: field kube.clusters[0].name: "A/b": name the configuration`},
		{head + "    - {proxy: nftables}\n", `x.yaml:3: field kube.clusters[0].name: "": name the configuration`},
		{head + "    - {name: a, cluster: Big_One}\n", `x.yaml:3: field kube.clusters[0].cluster: cluster name "Big_One"`},
		{head + "    - {name: a, nodes: 1}\n", `x.yaml:3: field kube.clusters[0].nodes: cross-node needs 2 nodes`},
		{head + "    - {name: a, nodes: 9}\n", `x.yaml:3: field kube.clusters[0].nodes: nodes 9: a local cluster has 1 to 8 nodes`},
		{head + "    - {name: a, extra_services: -1}\n", `x.yaml:3: field kube.clusters[0].extra_services: -1: give 0 to 50000 Services`},
		{head + "    - {name: a, proxy: nftables, socket_lb: true}\n", `x.yaml:3: field kube.clusters[0].socket_lb: proxy nftables with socket_lb: socket LB is an option of proxy vnetlab-ebpf`},
		{head + "    - {name: a, prxy: nftables}\n", `x.yaml:3: unknown field "prxy"`},
		{"kube:\n  clusters: []\n", `x.yaml:2: field kube.clusters: empty list`},
		{"kube:\n  cluster: k\n  extra_services: 10\n", `x.yaml:3: field kube.extra_services: applies to the configurations of kube.clusters`},
		{"kube:\n  cluster: k\n  clusters: [{name: a}]\n", `x.yaml:2: field kube.cluster: kube.clusters brings up its own clusters`},
		{"kube:\n  extra_tests: [tcp_nope]\n  clusters: [{name: a}]\n", `x.yaml:2: field kube.extra_tests[0]: unknown test "tcp_nope"`},
		{"kube:\n  extra_services: 60000\n  clusters: [{name: a}]\n", `x.yaml:2: field kube.extra_services: 60000: give 0 to 50000`},
	}
	for _, c := range cases {
		_, err := Parse("x.yaml", []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %q", c.body, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error spans lines: %q", c.body, err)
		}
	}
}

// The repository's table scenario parses.
func TestKubeProxiesScenario(t *testing.T) {
	s, err := Load("../../scenarios/kube-proxies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Kube.Tabled() || len(s.Kube.Clusters) < 4 {
		t.Errorf("kube-proxies.yaml: %+v", s.Kube)
	}
}

package scenario

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/kube/bench"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

func TestParseKube(t *testing.T) {
	s, err := Parse("k.yaml", []byte(`
description: pod, Service and host paths of a local cluster
tests: [tcp_stream, tcp_crr]
duration: 2s
repeat: 3
output: k.json
report: k-report
kube:
  cluster: k
  paths: [pod, service]
  placements: [same-node]
  nodes: [k-node2, k-node1]
  image: vnetlab.local/vnetlab:x
  label: local
  ready_timeout: 30s
  ip_family: dual
`))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.BenchSpec(bench.DefaultSpec()); err != nil || b.Pods.Family != family.Dual {
		t.Errorf("kube.ip_family dual: the run measures %q (%v)", b.Pods.Family, err)
	}
	if !s.IsKube() || s.ForKube() != nil || s.ForLabs("run") == nil {
		t.Fatalf("a kube: file is a cluster run: IsKube %v", s.IsKube())
	}
	k := s.Kube
	if k.Cluster != "k" || !slices.Equal(k.Paths, []string{"pod", "service"}) || !slices.Equal(k.Placements, []string{"same-node"}) ||
		!slices.Equal(k.Nodes, []string{"k-node2", "k-node1"}) || k.Image != "vnetlab.local/vnetlab:x" || k.Label != "local" ||
		k.ReadyTimeoutValue() != 30*time.Second {
		t.Errorf("kube: %+v", k)
	}
	spec := s.RunSpec(runner.DefaultSpec())
	if spec.Duration != 2*time.Second || spec.Repeat != 3 || !slices.Equal(spec.Tests, []engine.Test{engine.TCPStream, engine.TCPCRR}) {
		t.Errorf("measurement settings: %v %d %v", spec.Duration, spec.Repeat, spec.Tests)
	}
	if s.Output != "k.json" || s.Report != "k-report" {
		t.Errorf("output %q, report %q", s.Output, s.Report)
	}
	if _, err := s.LabSpec(DefaultLab()); err == nil || !strings.Contains(err.Error(), "vnetlab kube run -f k.yaml") {
		t.Errorf("up -f of a kube file: %v", err)
	}
	lab, err := Parse("l.yaml", []byte("mode: bridge\n"))
	if err != nil || lab.IsKube() || lab.ForKube() == nil || !strings.Contains(lab.ForKube().Error(), "vnetlab run -f l.yaml") {
		t.Errorf("a lab file under kube run: %v", err)
	}
}

// Errors in a kube: section name the file, the line and kube.FIELD, in one line.
func TestKubeErrorsNameLineAndField(t *testing.T) {
	cases := []struct{ body, want string }{
		{"kube:\n  cluster: k\n  clustr: k\n", `x.yaml:3: unknown field "kube.clustr"`},
		{"kube:\n  cluster: k\n  paths: [pod, nodeport]\n", `x.yaml:3: field kube.paths[1]: unknown path "nodeport" for a cluster (known: pod, service, host)`},
		{"kube:\n  placements:\n    - same-node\n    - far\n", `x.yaml:4: field kube.placements[1]: unknown placement "far"`},
		{"kube:\n  cluster: k\n  kubeconfig: /x\n", `x.yaml:2: field kube.cluster: give either cluster`},
		{"kube:\n  cluster: K_1\n", `x.yaml:2: field kube.cluster: cluster name "K_1"`},
		{"kube:\n  nodes: [a, b, c]\n", `x.yaml:2: field kube.nodes: 3 nodes: name at most two`},
		{"kube:\n  paths: []\n", `x.yaml:2: field kube.paths: empty list`},
		{"kube:\n  cluster: k\n  ready_timeout: soon\n", `x.yaml:3: field kube.ready_timeout: "soon" is not a positive duration`},
		{"kube:\n  cluster: k\n  ip_family: ipv5\n", `x.yaml:3: field kube.ip_family: "ipv5": use ipv4, ipv6 or dual`},
		{"kube:\n  nodes: a\n", `x.yaml:2: cannot unmarshal`},
		{"tests: [tcp_rr]\nmodes: [bridge]\nkube: {cluster: k}\n", `x.yaml:2: field modes: a file with kube: measures a cluster and modes describes labs`},
		{"paths: [pod]\nkube: {cluster: k}\n", `x.yaml:1: field paths: a file with kube: measures a cluster`},
		{"kube: {cluster: k}\nrepeat: 0\n", `x.yaml:2: field repeat: 0 is below the minimum 1`},
		{"kube: {cluster: k}\ntests: [tcp_nope]\n", `x.yaml:2: field tests[0]: unknown test "tcp_nope"`},
		{"kube: k\n", `x.yaml:1: cannot unmarshal`},
		{"tests: [tcp_rr]\nkube: {cluster: k, lab: true}\n", `x.yaml:2: field kube.lab: lab: true measures the file's modes beside one local cluster`},
		{"modes: [host]\nkube: {kubeconfig: /x, lab: true}\n", `field kube.lab: lab: true measures the file's modes beside one local cluster`},
		{"modes: [host]\nkube:\n  cluster: k\n  lab: true\n  clusters: [{name: a, cni: bridge}]\n", `field kube.lab: lab: true measures`},
		{"modes: [host]\nkube: {cluster: k, lab_same_node: [bridge]}\n", `x.yaml:2: field kube.lab_same_node: lab_same_node adds a one-node lab beside the file's two-node lab: set kube.lab: true and nodes: 2`},
		{"modes: [host]\nkube: {cluster: k, lab: true, lab_same_node: [bridge]}\n", `field kube.lab_same_node: lab_same_node adds a one-node lab`},
		{"modes: [host]\nnodes: 2\nkube:\n  cluster: k\n  lab: true\n  lab_same_node: [host, brige]\n", `x.yaml:6: field kube.lab_same_node[1]: unknown mode "brige"`},
		{"modes: [host]\nnodes: 2\nkube:\n  cluster: k\n  lab: true\n  lab_same_node: [host-gw]\n", `field kube.lab_same_node[0]: mode host-gw needs 2 nodes: list it under modes:`},
		{"modes: [host]\nnodes: 2\nkube:\n  cluster: k\n  lab: true\n  lab_same_node: [host, host]\n", `field kube.lab_same_node[1]: mode host is listed twice`},
		{"modes: [host]\nnodes: 2\nkube:\n  cluster: k\n  lab: true\n  lab_same_node: []\n", `field kube.lab_same_node: empty list`},
		{"modes: [bridge]\nnodes: 2\noptions: {bridge_nf_call_iptables: off}\nkube:\n  cluster: k\n  lab: true\n  lab_same_node: [bridge]\n", `field kube.lab_same_node: lab_same_node's modes are built without options`},
	}
	for _, c := range cases {
		_, err := Parse("x.yaml", []byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.body, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error spans lines: %q", c.body, err)
		}
	}
}

// kube.lab: the file's top-level lab keys are the lab measured beside the
// cluster; kube:'s keys stay the cluster's.
func TestParseKubeLab(t *testing.T) {
	s, err := Parse("f.yaml", []byte(`
modes: [host, vxlan]
nodes: 2
paths: [pod]
tests: [tcp_rr]
kube:
  cluster: fl
  lab: true
  lab_same_node: [host, bridge]
  paths: [pod, host]
`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.BenchSpec(bench.DefaultSpec())
	if err != nil || !b.Lab || b.Cluster.Local != "fl" || b.Measure.Nodes != 2 || !slices.Equal(b.Measure.Paths, []string{"pod"}) ||
		len(b.Measure.Modes) != 2 || b.Measure.Modes[1].Mode != "vxlan" || !slices.Equal(b.Pods.Paths, []string{"pod", "host"}) ||
		!slices.Equal(b.LabSameNode, []string{"host", "bridge"}) {
		t.Errorf("kube.lab: %+v, %v", b, err)
	}
}

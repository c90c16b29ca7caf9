package runner

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/present/report"
)

const ebpfLabPrefix = "far" // this file's labs only

// The eBPF fast paths through `run`: veth-ebpf and macvlan, pod path and
// service path with the tc provider and the socket-level one (whose
// clients the engines start in the lab's cgroup: on macvlan nothing else
// could reach the clusterIP, so a valid sample proves the translation).
func TestRunEBPFFastPaths(t *testing.T) {
	requireLabs(t, svcLabPrefix)
	t.Cleanup(func() {
		states, _ := lab.List()
		for _, st := range states {
			if strings.HasPrefix(st.Name, ebpfLabPrefix) {
				_ = lab.Down(st.Name, nil)
			}
		}
	})
	tests := []engine.Test{engine.TCPStream}
	if os.Getenv("VNETLAB_BIN") != "" {
		tests = append(tests, engine.TCPCRR) // the rr engine runs `vnetlab rr-client`
	}
	pods, err := lab.DefaultPodSpecs(lab.DefaultPods, lab.DefaultPodCIDR, 1)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Modes: []ModeVariant{{Label: "veth-ebpf", Mode: "veth-ebpf"}, {Label: "macvlan", Mode: "macvlan"}},
		Paths: []string{"pod", ServicePath}, Tests: tests, Duration: time.Second, Repeat: 1, Pods: pods,
		PodCIDR: lab.DefaultPodCIDR, Providers: []string{"ebpf", "ebpf-sock", "iptables"}, LabPrefix: ebpfLabPrefix}
	res, err := Run(context.Background(), spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	report.Table(&buf, res, false)
	t.Log("\n" + buf.String())
	want := map[string]bool{}
	for _, m := range []string{"veth-ebpf", "macvlan"} {
		want[m+"/pod"] = true
		for _, p := range []string{"ebpf", "ebpf-sock"} {
			want[m+"/"+p] = true
		}
	}
	want["macvlan/iptables"] = true
	for _, c := range res.Cells {
		k := c.Mode + "/" + c.Path
		if c.Path == ServicePath {
			k = c.Mode + "/" + c.Provider
		}
		delete(want, k)
		if c.Valid != 1 {
			t.Errorf("%s: %d valid samples: %+v", c.ID(), c.Valid, c.Samples)
		}
	}
	if len(want) != 0 {
		t.Errorf("no cells for %v", want)
	}
	// iptables cannot serve veth-ebpf (replies bypass the node's conntrack): skipped, with the reason.
	skipped := false
	for _, s := range res.Metadata.Skipped {
		if s.Mode == "veth-ebpf" && s.Provider == "iptables" && strings.Contains(s.Reason, "bpf_redirect_peer") {
			skipped = true
		}
	}
	if !skipped {
		t.Errorf("iptables on veth-ebpf was not skipped with its reason: %+v", res.Metadata.Skipped)
	}
}

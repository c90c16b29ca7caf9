package runner

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/present/report"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

const svcLabPrefix = "svr" // this file's labs only

// Seed 002's table as one run: pod path and service path per provider, with
// and without 1000 generated services; every service cell gets its provider,
// its count, a load time and a comparison with the pod cell.
func TestRunServicePathProviders(t *testing.T) {
	requireLabs(t, svcLabPrefix)
	pods, err := lab.DefaultPodSpecs(lab.DefaultPods, lab.DefaultPodCIDR, 1)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Modes: []ModeVariant{{Label: "veth-routed", Mode: "veth-routed"}}, Paths: []string{"pod", ServicePath},
		Tests: []engine.Test{engine.TCPStream}, Duration: time.Second, Repeat: 1, Pods: pods, PodCIDR: lab.DefaultPodCIDR,
		Providers: []string{"iptables", "nftables", "ebpf"}, ExtraServices: []int{0, 1000}, LabPrefix: svcLabPrefix}
	res, err := Run(context.Background(), spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	report.Table(&buf, res, false)
	t.Log("\n" + buf.String())
	if len(res.Cells) != 7 {
		t.Fatalf("%d cells, want 1 pod + 3 providers x 2 counts", len(res.Cells))
	}
	seen := map[string]bool{}
	for _, c := range res.Cells {
		if c.Valid != 1 {
			t.Errorf("%s: %d valid samples: %+v", c.ID(), c.Valid, c.Samples)
		}
		if c.Path == "pod" {
			if c.Provider != "" || c.VsPod != nil {
				t.Errorf("pod cell has provider %q", c.Provider)
			}
			continue
		}
		seen[fmt.Sprintf("%s+%d", c.Provider, c.ExtraServices)] = true
		if c.ServiceLoadSec <= 0 || c.VsPod == nil || c.VsPod.Ratio <= 0 {
			t.Errorf("%s: load %.3fs, vs pod %+v", c.ID(), c.ServiceLoadSec, c.VsPod)
		}
	}
	for _, k := range []string{"iptables+0", "iptables+1000", "nftables+0", "nftables+1000", "ebpf+0", "ebpf+1000"} {
		if !seen[k] {
			t.Errorf("no cell for %s", k)
		}
	}
	if !strings.Contains(buf.String(), "vs pod") {
		t.Error("the table has no vs pod column")
	}
}

// dialEngine is a fast engine for failure tests: one TCP connection from
// the client namespace to a listener in the server namespace.
type dialEngine struct{}

func (dialEngine) Name() string                { return "sv-dial" }
func (dialEngine) Supports(t engine.Test) bool { return t == engine.TCPStream }
func (dialEngine) Run(ctx context.Context, tg engine.Target, s engine.Spec) (engine.Result, error) {
	var ln net.Listener
	if err := nsutil.Do(tg.ServerNS, func() (err error) { ln, err = net.Listen("tcp4", ":5201"); return }); err != nil {
		return engine.Result{}, err
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	var c net.Conn
	err := nsutil.Do(tg.ClientNS, func() (err error) { c, err = net.DialTimeout("tcp4", tg.Addr+":5201", 2*time.Second); return })
	if err != nil {
		return engine.Result{}, fmt.Errorf("connect %s:5201: %w", tg.Addr, err)
	}
	c.Close()
	return engine.Result{Value: 1}, nil
}

// Bridge with nf-call off: the netfilter provider's cell fails, as the run
// predicts, with the kernel's reason as its note: a result, not an error. The
// ebpf cell works.
func TestRunReportsNfCallOffFailure(t *testing.T) {
	requireLabs(t, svcLabPrefix)
	engine.Register(dialEngine{})
	pods, err := lab.DefaultPodSpecs(lab.DefaultPods, lab.DefaultPodCIDR, 1)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Modes: []ModeVariant{{Label: "bridge-nf-off", Mode: "bridge", Options: map[string]string{"bridge_nf_call_iptables": "off"}}},
		Paths: []string{ServicePath}, Tests: []engine.Test{engine.TCPStream}, Engine: "sv-dial", Duration: time.Second, Repeat: 1,
		Pods: pods, PodCIDR: lab.DefaultPodCIDR, Providers: []string{"iptables", "ebpf"}, LabPrefix: svcLabPrefix}
	res, err := Run(context.Background(), spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	report.Table(&buf, res, false)
	t.Log("\n" + buf.String())
	for _, c := range res.Cells {
		switch c.Provider {
		case "iptables":
			if c.Valid != 0 || c.Failed != 1 || c.Note == "" || c.Status != "failed-as-expected" {
				t.Errorf("iptables on bridge nf-call off: valid %d failed %d note %q status %q; want a predicted failure and its reason", c.Valid, c.Failed, c.Note, c.Status)
			}
		case "ebpf":
			if c.Valid != 1 || c.Note != "" {
				t.Errorf("ebpf on bridge nf-call off: valid %d note %q", c.Valid, c.Note)
			}
		}
	}
	if err := analysis.Problems(res.Cells); err != nil {
		t.Errorf("a predicted failure made the run fail: %v", err)
	}
	out := buf.String()
	if !strings.Contains(out, "failed as expected bridge-nf-off/service(iptables)/tcp_stream: expected to fail: bridge_nf_call_iptables=off") {
		t.Errorf("the table does not show the predicted failure and its reason:\n%s", out)
	}
}

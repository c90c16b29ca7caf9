package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/scenario"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// --ip-family and ip_family: the flag over the file over ipv4; up gives
// the pods an address of each family; a bad family, and Services over
// IPv6 with a provider without them, are refused with the fix, named as
// the user gave them.
func TestIPFamilyFlags(t *testing.T) {
	if spec, _, err := resolveRun(t, "--modes", "veth-routed"); err != nil || spec.Family != family.IPv4 {
		t.Errorf("default family: %q, %v", spec.Family, err)
	}
	file := writeScenario(t, "mode: bridge\nip_family: ipv6\n")
	if spec, _, err := resolveRun(t, "-f", file); err != nil || spec.Family != family.IPv6 {
		t.Errorf("ip_family ipv6 from the file: %q, %v", spec.Family, err)
	}
	if spec, _, err := resolveRun(t, "-f", file, "--ip-family", "dual"); err != nil || spec.Family != family.Dual {
		t.Errorf("--ip-family dual over the file: %q, %v", spec.Family, err)
	}
	svc := writeScenario(t, "mode: veth-routed\nip_family: ipv6\npaths: [pod, service]\nproviders: [ebpf-sock]\n")
	if _, _, err := resolveRun(t, "-f", svc); err != nil {
		t.Errorf("service path over IPv6 with ebpf-sock: %v", err)
	}
	svc = writeScenario(t, "mode: veth-routed\nip_family: dual\npaths: [pod, service]\nproviders: [iptables, nftables]\n")
	if _, _, err := resolveRun(t, "-f", svc); err != nil {
		t.Errorf("service path over dual with iptables and nftables: %v", err)
	}
	if _, err := scenario.Load(writeScenario(t, "mode: bridge\nip_family: ipv5\n")); err == nil || !strings.Contains(err.Error(), `ip_family: IP family "ipv5": use ipv4, ipv6 or dual`) {
		t.Errorf("ip_family ipv5: %v", err)
	}
	r := newRunFlags(runner.DefaultSpec(), "", "")
	f := pflag.NewFlagSet("run", pflag.ContinueOnError)
	f.SetOutput(io.Discard)
	r.register(f)
	if err := f.Parse([]string{"--ip-family", "ipv5"}); err == nil || !strings.Contains(err.Error(), `IP family "ipv5": use ipv4, ipv6 or dual`) {
		t.Errorf("--ip-family ipv5: %v", err)
	}

	u := &upFlags{lab: scenario.DefaultLab(), output: "table"}
	uf := pflag.NewFlagSet("up", pflag.ContinueOnError)
	u.register(uf)
	if err := uf.Parse([]string{"--mode", "bridge", "--ip-family", "dual"}); err != nil {
		t.Fatal(err)
	}
	want, err := u.resolve(uf)
	if err != nil || len(want.Spec.Pods) != 2 || want.Spec.Pods[0].IP != "192.168.10.10" || want.Spec.Pods[0].IP6 != "fd00:10:244::a" {
		t.Errorf("up --ip-family dual: %+v, %v", want.Spec.Pods, err)
	}
	if _, err := resolveUp(t, "--mode", "bridge", "--ip-family", "ipv6", "--provider", "ebpf-sock"); err != nil {
		t.Errorf("up --provider ebpf-sock over IPv6: %v", err)
	}
	if _, err := resolveUp(t, "--mode", "bridge", "--ip-family", "ipv6", "--provider", "nftables"); err != nil {
		t.Errorf("up --provider nftables over IPv6: %v", err)
	}
	v6svc := writeScenario(t, "mode: veth-routed\nip_family: dual\nprovider: iptables\nservices:\n  - {service: '[fd00:10:96::100]:80/udp', backends: [pod-a]}\n")
	if _, err := resolveUp(t, "-f", v6svc); err != nil {
		t.Errorf("up -f with an IPv6 Service in a dual lab: %v", err)
	}
}

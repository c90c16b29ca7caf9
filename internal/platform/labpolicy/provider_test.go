package labpolicy

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// A stored lab's state, without building anything: Compile must refuse
// before a provider runs (the state has no node a provider could touch).
func fakeLab(mode string, options map[string]string) *lab.State {
	return &lab.State{Name: "np-fake", Mode: mode, Spec: lab.Spec{Options: options},
		Pods: []lab.PodState{{Name: "pod-a", IP: "192.168.10.10"}, {Name: "pod-b", IP: "192.168.10.11"}}}
}

func TestRefusedModes(t *testing.T) {
	for _, c := range []struct {
		mode    string
		options map[string]string
		want    string
	}{
		{modes.Macvlan, nil, "never cross the node's netfilter"},
		{modes.Ipvlan, nil, "never cross the node's netfilter"},
		{modes.VethEBPF, nil, "bpf_redirect_peer"},
		{modes.MacvlanEBPF, nil, "never crossing the node's netfilter"},
		{modes.Host, nil, "has no pods to isolate"},
		{modes.Bridge, map[string]string{"bridge_nf_call_iptables": "off"}, "bridge_nf_call_iptables=off"},
		{modes.TapNaive, nil, "not wired for this mode yet (works with: bridge, veth-routed)"},
	} {
		_, err := Compile(fakeLab(c.mode, c.options), &Config{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("mode %s %v: got %v, want one line with %q", c.mode, c.options, err, c.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "policy provider nftables cannot serve lab np-fake of mode "+c.mode+": ") {
			t.Errorf("mode %s: the refusal does not name provider, lab and mode: %v", c.mode, err)
		}
	}
	for _, m := range []string{modes.VethRouted, modes.Bridge} {
		if _, err := Compile(fakeLab(m, nil), &Config{}); err != nil {
			t.Errorf("mode %s refused: %v", m, err)
		}
	}
	if _, err := Compile(fakeLab(modes.VethRouted, nil), &Config{Provider: "ipchains"}); err == nil || !strings.Contains(err.Error(), `unknown policy provider "ipchains" (known: ebpf, iptables, nftables)`) {
		t.Errorf("unknown provider: %v", err)
	}
}

// TestEBPFModes: the ebpf provider asks modes.Policies.PodIf: its programs
// sit on the pods' own interfaces, so veth-ebpf and a bridge without
// bridge-nf-call are served; the rest is refused in one line.
func TestEBPFModes(t *testing.T) {
	for _, c := range []struct{ mode, want string }{
		{modes.Macvlan, "not wired for this mode yet (works with: bridge, veth-ebpf, veth-routed)"},
		{modes.NetkitEBPF, "not wired for this mode yet"},
		{modes.Host, "has no pods to isolate"},
	} {
		_, err := Compile(fakeLab(c.mode, nil), &Config{Provider: EBPF})
		if err == nil || !strings.HasPrefix(err.Error(), "policy provider ebpf cannot serve lab np-fake of mode "+c.mode+": ") || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("mode %s: got %v, want one line with %q", c.mode, err, c.want)
		}
	}
	for _, c := range []struct {
		mode    string
		options map[string]string
	}{{modes.VethRouted, nil}, {modes.Bridge, nil}, {modes.Bridge, map[string]string{"bridge_nf_call_iptables": "off"}}, {modes.VethEBPF, nil}} {
		if _, err := Compile(fakeLab(c.mode, c.options), &Config{Provider: EBPF}); err != nil {
			t.Errorf("mode %s %v refused: %v", c.mode, c.options, err)
		}
	}
}

func TestRefusedInput(t *testing.T) {
	parse := func(y string) netpol.Doc {
		d, err := netpol.Parse([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	c := &Config{}
	c.Merge(parse("apiVersion: v1\nkind: Pod\nmetadata: {name: pod-z}\n"))
	if _, err := Compile(fakeLab(modes.VethRouted, nil), c); err == nil || !strings.Contains(err.Error(), `lab np-fake has no pod "pod-z" to give labels (its pods: pod-a, pod-b)`) {
		t.Errorf("a Pod document naming no lab pod: %v", err)
	}
	c = &Config{}
	c.Merge(parse("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p}\nspec: {podSelector: {}, ingress: [{ports: [{port: web}]}]}\n"))
	if _, err := Compile(fakeLab(modes.VethRouted, nil), c); err == nil || !strings.Contains(err.Error(), `policy default/p: spec.ingress[0].ports[0].port: no pod has a TCP port named "web" (pods' named ports: none)`) {
		t.Errorf("a named port no pod has: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("the kernel probe for SCTP needs root")
	}
	c = &Config{}
	c.Merge(parse("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: p}\nspec: {podSelector: {}, ingress: [{ports: [{protocol: SCTP, port: 9}]}]}\n"))
	_, err := Compile(fakeLab(modes.VethRouted, nil), c)
	if kernel.Check(kernel.SCTP) == nil {
		if err != nil {
			t.Errorf("SCTP refused on a kernel that has it: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "a policy names protocol SCTP, which this kernel cannot carry: kernel has no sctp support (CONFIG_IP_SCTP)") {
		t.Errorf("SCTP on a kernel without it: %v", err)
	}
}

func TestDefaultLabels(t *testing.T) {
	c := &Config{}
	w, err := c.World(fakeLab(modes.VethRouted, nil))
	if err != nil {
		t.Fatal(err)
	}
	if p := w.Pod(netpol.DefaultNamespace, "pod-b"); p == nil || p.Labels[PodLabel] != "pod-b" || len(p.IPs) != 1 || p.IPs[0].String() != "192.168.10.11" {
		t.Errorf("pod-b in the model: %+v", p)
	}
}

// Every cluster enforcer's lab equivalent is a provider of this registry,
// the pods' interfaces' one included (vnetlab's controller on veth-ebpf is
// the ebpf provider's data path, not nftables').
func TestEnforcersLabProviders(t *testing.T) {
	for _, e := range clusternet.Enforcers {
		for _, podIf := range []bool{false, true} {
			name := e.LabProviderFor(podIf)
			if _, err := Get(name); (err == nil) != e.Enforces {
				t.Errorf("enforcer %s (pod interfaces %v): lab provider %q: %v", e.Name, podIf, name, err)
			}
		}
	}
	if v, _ := clusternet.GetEnforcer(clusternet.PolicyVnetlab); v.LabProviderFor(true) != EBPF || v.LabProviderFor(false) != NFTables {
		t.Errorf("vnetlab's controller: lab providers %q (pod interfaces), %q (node filter), want %s, %s", v.LabProviderFor(true), v.LabProviderFor(false), EBPF, NFTables)
	}
}

// Every provider names the profile stages it runs in, each one the
// profiler knows, and EnforcerCPU sums exactly those of a cell's profile.
func TestEnforcerStages(t *testing.T) {
	known := profile.DefaultRules.Order()
	for _, name := range Names() {
		p, _ := Get(name)
		if len(p.Info().Stages) == 0 {
			t.Errorf("provider %s names no profile stage (Info.Stages)", name)
		}
		for _, id := range p.Info().Stages {
			if !slices.Contains(known, id) {
				t.Errorf("provider %s: stage %q is not one of the profiler's (%s)", name, id, strings.Join(known, ", "))
			}
		}
	}
	pr := &results.Profile{DataPathUS: 20, Stages: []results.StageCost{{Stage: "tables", US: 1.5}, {Stage: "nf_sets", US: 0.5}, {Stage: "tc_bpf", US: 3}, {Stage: "veth", US: 15}}}
	stages, us, share, ok := EnforcerCPU(NFTables, pr)
	if !ok || us != 2 || share != 0.1 || stages != "netfilter: filter tables + netfilter: set lookups" {
		t.Errorf("nftables: %q %.2f µs share %.3f ok %v, want the two netfilter stages, 2 µs, 0.1", stages, us, share, ok)
	}
	if _, us, share, ok := EnforcerCPU(EBPF, pr); !ok || us != 3 || share != 0.15 {
		t.Errorf("ebpf: %.2f µs share %.3f ok %v, want tc/BPF's 3 µs, 0.15", us, share, ok)
	}
	if _, _, _, ok := EnforcerCPU(EBPF, nil); ok {
		t.Error("a cell without a profile has no enforcer CPU")
	}
	if _, _, _, ok := EnforcerCPU("", pr); ok {
		t.Error("a cell without a provider has no enforcer CPU")
	}
}

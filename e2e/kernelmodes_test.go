package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

type doctorMode struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail"`
}

// doctorModes is `vnetlab doctor -o json`'s view of each mode.
func doctorModes(t *testing.T) map[string]doctorMode {
	t.Helper()
	d := vnetlab(t, "doctor", "-o", "json")
	var rep struct {
		Modes []doctorMode `json:"modes"`
	}
	if err := json.Unmarshal([]byte(d.stdout), &rep); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, d.stdout)
	}
	out := map[string]doctorMode{}
	for _, m := range rep.Modes {
		out[m.Name] = m
	}
	return out
}

// needMode skips the test when doctor says mode is unavailable here (or its
// detail lacks want), with doctor's reason; on the guest kernel it fails.
func needMode(t *testing.T, modes map[string]doctorMode, mode, want string) {
	t.Helper()
	m, ok := modes[mode]
	switch {
	case !ok:
		t.Fatalf("doctor does not list %s", mode)
	case kernel.GuestLacks(mode):
		if m.Available {
			t.Fatalf("the guest kernel lacks what %s needs, but doctor says it is available: %q", mode, m.Detail)
		}
		t.Skipf("the guest kernel lacks %s; doctor says: %s", mode, m.Detail)
	case m.Available && strings.Contains(m.Detail, want):
		return
	case kernel.InGuest():
		t.Fatalf("the guest kernel has everything %s needs, but doctor says: available=%v %q", mode, m.Available, m.Detail)
	default:
		t.Skipf("%s not usable on this kernel: %s", mode, m.Detail)
	}
}

// The seed rows this machine's kernel may lack (ipvlan, the Open vSwitch
// kernel datapath, netkit) and veth-ebpf: built, pod-to-pod and pod-to-gateway
// ping, a short iperf3 stream through `run`, clean teardown. The stock-kernel
// harness runs them on a kernel that has them all.
func TestKernelModes(t *testing.T) {
	modes := doctorModes(t)
	for _, c := range []struct {
		name, mode, want string
		opts             []string
		paths            string
	}{
		{"ipvlan-l2", "ipvlan", "", []string{"ipvlan_mode=l2"}, "pod,service"},
		{"ipvlan-l3", "ipvlan", "", []string{"ipvlan_mode=l3"}, "pod,service"},
		{"ovs-system", "ovs", "datapath system", []string{"datapath=system"}, "pod"},
		{"ovs-internal-system", "ovs-internal", "datapath system", []string{"datapath=system"}, "pod"},
		{"veth-ebpf", "veth-ebpf", "", nil, "pod,service"},
		{"netkit", "netkit", "", nil, "pod,service"},
		{"netkit-ebpf", "netkit-ebpf", "", nil, "pod,service"},
	} {
		t.Run(c.name, func(t *testing.T) {
			needMode(t, modes, c.mode, c.want)
			args := []string{"--mode", c.mode}
			for _, o := range c.opts {
				args = append(args, "--option", o)
			}
			name := "e2k-" + strings.ReplaceAll(c.name, "-system", "")
			name = name[:min(len(name), 15)]
			up(t, name, args...)
			l := lsLab(t, name)
			ping(t, name, "pod-b", l.Pods[0].IP)
			ping(t, name, "pod-a", l.Pods[1].IP)
			gw := l.Gateway
			if c.mode != "ipvlan" && !strings.HasPrefix(c.mode, "ovs") {
				gw = l.Nodes[0].IP // the routed modes' gateway is a name for the node's end, not an address
			}
			ping(t, name, "pod-b", gw)
			must(t, "down", name)
			assertGone(t, name)

			out := t.TempDir() + "/r.json"
			run := []string{"run", "--modes", c.mode, "--paths", c.paths, "--tests", "tcp_stream", "--duration", "1s", "--repeat", "1", "-o", out}
			providers := []string{"iptables"} // run's default
			if strings.Contains(c.paths, "service") && c.mode == "ipvlan" {
				providers = []string{"iptables", "nftables", "ebpf"} // seed 002's ipvlan rows
				if kernel.GuestLacks("ebpf") {
					providers = providers[:2]
				}
			}
			if strings.HasSuffix(c.mode, "-ebpf") {
				providers = []string{"ebpf"} // their own default
			} else {
				run = append(run, "--providers", strings.Join(providers, ","))
			}
			for _, o := range c.opts {
				run = append(run, "--option", o)
			}
			r := must(t, run...)
			if strings.Contains(r.stdout, "FAILED") {
				t.Errorf("run %v: a cell failed:\n%s\n%s", run, r.stdout, r.stderr)
			}
			want := map[string]bool{"pod/": true}
			if strings.Contains(c.paths, "service") {
				for _, p := range providers {
					want["service/"+p] = true
				}
			}
			for _, cell := range resultCells(t, out) {
				if cell.Mode == c.mode && cell.Valid > 0 {
					delete(want, cell.Path+"/"+cell.Provider)
				}
			}
			if len(want) > 0 {
				t.Errorf("run %v: no valid cell for %v:\n%s\n%s", run, want, r.stdout, r.stderr)
			}
		})
	}
}

// doctor says when the CPU is emulated (the stock-kernel harness's qemu
// guest runs under TCG), and only then.
func TestDoctorSaysWhenEmulated(t *testing.T) {
	var rep struct {
		Emulation string `json:"emulation"`
	}
	d := vnetlab(t, "doctor", "-o", "json")
	if err := json.Unmarshal([]byte(d.stdout), &rep); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, d.stdout)
	}
	if guest := kernel.InGuest(); guest != (rep.Emulation != "") {
		t.Errorf("in the qemu guest: %v; doctor's emulation: %q", guest, rep.Emulation)
	}
}

type resultCell struct {
	Mode     string `json:"mode"`
	Path     string `json:"path"`
	Provider string `json:"provider"`
	Valid    int    `json:"valid_samples"`
}

// resultCells reads the cells of a results file `run -o` wrote.
func resultCells(t *testing.T, path string) []resultCell {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cells []resultCell `json:"cells"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return f.Cells
}

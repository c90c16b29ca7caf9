package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
)

const profLabPrefix = "stp"

// brNFIntoIptables are br_netfilter's functions on the way from a bridged
// frame into the IP hooks.
var brNFIntoIptables = []string{"br_nf_hook_thresh", "br_nf_pre_routing_finish", "br_nf_forward_finish", "setup_pre_routing"}

// profiledLabs skips without root, iperf3 or VNETLAB_BIN (the rr engine
// runs `vnetlab rr-client`, the tap modes `vnetlab tapswitch`), removes this
// file's labs at the end, and returns the default pods.
func profiledLabs(t *testing.T) []lab.PodSpec {
	t.Helper()
	requireLabs(t, profLabPrefix)
	if os.Getenv("VNETLAB_BIN") == "" {
		t.Skip("the rr engine and the tap switch run the vnetlab binary: set VNETLAB_BIN")
	}
	pods, err := lab.DefaultPodSpecs(lab.DefaultPods, lab.DefaultPodCIDR, 1)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// frameSamples counts the data-path samples of a cell's folded stacks that
// have a frame with one of the prefixes.
func frameSamples(t *testing.T, c *results.Cell, prefixes ...string) uint64 {
	t.Helper()
	p, _, err := profile.LoadStacks(".", c.Profile)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, st := range p.Stacks {
		if !profile.Counted(profile.DefaultRules.Kind(profile.DefaultRules.Attribute(st))) {
			continue
		}
	frames:
		for _, f := range st.Frames {
			for _, pre := range prefixes {
				if strings.HasPrefix(f, pre) {
					n += st.Count
					break frames
				}
			}
		}
	}
	return n
}

// Known structure shows up in real profiles: forwarding in the node for
// veth-routed and not for macvlan; br_netfilter's hooks on a bridge with
// bridge_nf_call_iptables on, and not with it off.
func TestProfileShowsKnownStructure(t *testing.T) {
	pods := profiledLabs(t)
	dir := t.TempDir()
	spec := Spec{
		Modes: []ModeVariant{{Label: "veth-routed", Mode: "veth-routed"}, {Label: "macvlan", Mode: "macvlan"},
			{Label: "bridge", Mode: "bridge"}, {Label: "bridge-nf-off", Mode: "bridge", Options: map[string]string{"bridge_nf_call_iptables": "off"}}},
		Paths: []string{"pod"}, Tests: []engine.Test{engine.TCPRR}, Duration: time.Second, Repeat: 1, Settings: knob.Settings{Size: 1},
		Pods: pods, PodCIDR: lab.DefaultPodCIDR, LabPrefix: profLabPrefix, Profile: true, ProfileDir: dir,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	cells := map[string]*results.Cell{}
	for _, c := range res.Cells {
		if c.Valid != 1 || c.Profile == nil || c.Profile.Units <= 0 || c.Profile.DataPathUS <= 0 {
			t.Fatalf("%s: valid=%d profile %+v", c.Mode, c.Valid, c.Profile)
		}
		for _, f := range []string{c.Profile.Files.Pprof, c.Profile.Files.Folded, c.Profile.Files.Flame} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v", c.Mode, err)
			}
		}
		t.Logf("%s: %.2f µs/transaction, ip_forward %d, br_nf_* %d, br_netfilter into iptables %d samples, fib lookups %.2f/transaction", c.Mode, c.Profile.DataPathUS,
			frameSamples(t, c, "ip_forward"), frameSamples(t, c, "br_nf_"), frameSamples(t, c, brNFIntoIptables...), c.Profile.Event(profile.EventFibLookup).PerUnit)
		cells[c.Mode] = c
	}
	if frameSamples(t, cells["veth-routed"], "ip_forward") == 0 {
		t.Error("veth-routed: no sample under ip_forward")
	}
	if n := frameSamples(t, cells["macvlan"], "ip_forward"); n != 0 {
		t.Errorf("macvlan: %d samples under ip_forward", n)
	}
	if fib := cells["veth-routed"].Profile.Event(profile.EventFibLookup).PerUnit; fib < 1 {
		t.Errorf("veth-routed: %.2f FIB lookups per transaction, want 1 or more (the node routes each packet)", fib)
	}
	// With the sysctl off, br_netfilter's hook functions are still called
	// and return at once; the path into iptables (the _finish callbacks,
	// br_nf_hook_thresh) is what the sysctl switches off.
	if frameSamples(t, cells["bridge"], brNFIntoIptables...) == 0 {
		t.Error("bridge with bridge_nf_call_iptables on: no sample in br_netfilter's path into iptables")
	}
	if n := frameSamples(t, cells["bridge-nf-off"], brNFIntoIptables...); n != 0 {
		t.Errorf("bridge with bridge_nf_call_iptables off: %d samples in br_netfilter's path into iptables", n)
	}
}

// The iptables provider at 10k extra Services walks its chains for every
// new connection: the filter tables are the largest stage of a tcp_crr
// connection, larger than with the ebpf provider, where they stay small.
func TestProfileServiceTablesAtScale(t *testing.T) {
	pods := profiledLabs(t)
	spec := Spec{Modes: []ModeVariant{{Label: "veth-routed", Mode: "veth-routed"}}, Paths: []string{ServicePath},
		Tests: []engine.Test{engine.TCPCRR}, Duration: time.Second, Repeat: 1, Settings: knob.Settings{Size: 1}, Pods: pods, PodCIDR: lab.DefaultPodCIDR,
		Providers: []string{"iptables", "ebpf"}, ExtraServices: []int{10000}, LabPrefix: profLabPrefix, Profile: true, ProfileDir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	tables := map[string]results.StageCost{}
	largest := map[string]string{}
	for _, c := range res.Cells {
		if c.Profile == nil {
			t.Fatalf("%s: no profile", c.Provider)
		}
		tables[c.Provider] = c.Profile.Stage("tables")
		var top results.StageCost
		for _, s := range c.Profile.Stages {
			if profile.Counted(s.Kind) && s.US > top.US {
				top = s
			}
		}
		largest[c.Provider] = top.Stage
		t.Logf("%s+10000: tables %.1f µs/connection (%.0f%% of %.1f µs), largest stage %s", c.Provider, tables[c.Provider].US, 100*tables[c.Provider].Share, c.Profile.DataPathUS, top.Stage)
	}
	if largest["iptables"] != "tables" {
		t.Errorf("iptables at 10k Services: largest stage %s, want the filter tables", largest["iptables"])
	}
	if tables["ebpf"].US*3 > tables["iptables"].US {
		t.Errorf("tables per connection: ebpf %.2f µs, iptables %.2f µs: want ebpf's under a third", tables["ebpf"].US, tables["iptables"].US)
	}
}

// tap-naive moves one frame per read() and write() on the tun device: its
// profile has the tun driver's read and write paths.
func TestProfileTapNaive(t *testing.T) {
	pods := profiledLabs(t)
	spec := Spec{Modes: []ModeVariant{{Label: "tap-naive", Mode: "tap-naive"}}, Paths: []string{"pod"},
		Tests: []engine.Test{engine.TCPStream}, Duration: time.Second, Repeat: 1, Settings: knob.Settings{Streams: 1}, Pods: pods, PodCIDR: lab.DefaultPodCIDR,
		LabPrefix: profLabPrefix, Profile: true, ProfileDir: t.TempDir()}
	res, err := Run(context.Background(), spec, Provenance{}, quiet{t})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Cells[0]
	if c.Profile == nil {
		t.Fatal("no profile")
	}
	read, write := frameSamples(t, c, "tun_chr_read_iter", "tun_put_user"), frameSamples(t, c, "tun_chr_write_iter", "tun_get_user")
	t.Logf("tap-naive: tun/tap stage %.1f µs/MB, read path %d, write path %d samples", c.Profile.Stage("tun").US, read, write)
	if read == 0 || write == 0 {
		t.Errorf("tap-naive: tun read path %d samples, write path %d: want both", read, write)
	}
}

package results

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "write testdata/schema-v<SchemaVersion>.golden.json (a new schema version only)")

// golden is the file of schema version v.
func golden(v int) string { return filepath.Join("testdata", fmt.Sprintf("schema-v%d.golden.json", v)) }

// fixture is a file with every field of every type it holds set at least
// once (TestSchemaFixtureComplete), with deterministic values.
func fixture() *File {
	t0 := time.Date(2026, 11, 25, 3, 0, 0, 123456789, time.UTC)
	cpu := func(k float64) *SampleCPU {
		return &SampleCPU{UserSec: 0.1 * k, SystemSec: 0.2 * k, IRQSec: 0.01 * k, SoftirqSec: 0.3 * k, IdleSec: 1.1 * k,
			StealSec: 0.02 * k, NetRx: 1000, NetTx: 2000, WallSec: 2.001, Window: "client"}
	}
	sample := func(v float64, round string) Sample {
		return Sample{RoundIndex: int(v), Slot: 2,
			Result: Result{Value: v, Retransmits: 3, LossPct: 0.5, Transfers: 123456, Bytes: 2.5e9,
				Latency: map[string]float64{"p50": 30.5, "p99": 48.25}, LatencySamples: 4000, Errors: 2,
				Schedule: &Schedule{Offered: 2000, Flows: 2, Scheduled: 4000, Sent: 3990, Late: 120, MaxLagUs: 98500.5, Behind: true}},
			Valid: true, Start: t0.Add(time.Duration(v) * time.Second), Round: round,
			CPU: cpu(1), NodeCPU: map[string]*SampleCPU{"node-1": cpu(0.5)},
		}
	}
	failed := Sample{Error: "iperf3 client: unable to connect to server: Connection refused", Start: t0.Add(time.Minute)}
	cluster := Cluster{Name: "veth-routed", ServerVersion: "v1.37.0",
		Nodes: []ClusterNode{{Name: "node-1", Kernel: "6.18.44", OS: "Debian GNU/Linux 12 (bookworm)",
			ContainerRuntime: "containerd://1.7.24", Kubelet: "v1.37.0", InternalIP: "10.77.0.2"}},
		CNI: "vnetlab veth-routed + host-local", CNIPlugin: "vnetlab", CNIMode: "veth-routed",
		KubeProxyMode: "vnetlab-ebpf", SocketLB: true, ProxySince: "2026-11-25T02:40:00Z", NetworkPolicy: "vnetlab", PolicyLabProvider: "ebpf", Image: "vnetlab-measure:dev", Namespace: "vnetlab-run-1",
		HowDetected: map[string]string{"cni": "the local cluster's configuration"}, NodeCPU: "cgroup: each node's cpu.stat"}
	side := func(ns, link string) *PacketSide {
		return &PacketSide{NS: ns, Link: link, Packets: 1000, Segments: 4000, AvgBytes: 5792.5, AvgSegment: 1448.125, MaxBytes: 65226}
	}
	cmp := &Comparison{Baseline: "host", Ratio: 0.75, RatioCI95: []float64{0.7, 0.8}, Test: "mann-whitney-u",
		PValue: 0.008, Significant: true, Verdict: "slower", MinPValue: 0.008, WelchP: 0.001, Note: "fixture",
		Method: "paired-rounds", Pairs: 12, HalfWidth: 0.018, Confidence: 0.965, PrecisionMet: new(true), MetAtRound: 11}
	cost := &CPUCost{UserSec: 0.1, SystemSec: 0.2, IRQSec: 0.01, SoftirqSec: 0.3, BusySec: 0.61, Samples: 2,
		PerGB: 0.244, PerKTrans: 0.005, NetRxPerTrans: 0.5, NetTxPerTrans: 0.25, NetRxPerGB: 400, NetTxPerGB: 800,
		Nodes: map[string]*CPUCost{"node-1": {UserSec: 0.05, SystemSec: 0.1, BusySec: 0.15, Samples: 2}}}
	proof := sample(7, RoundWarmupProof)
	cell := &Cell{
		Mode: "bridge-nf-off", ModeOptions: map[string]string{"nf_call": "off"}, Path: "service", Provider: "iptables",
		Test: "tcp_rr", Engine: "rr", Unit: "trans/s",
		Samples: []Sample{sample(1, ""), sample(2, ""), failed}, Median: 1.5, Min: 1, Max: 2, Valid: 2, Failed: 1,
		ExtraServices: 1000, ServiceLoadSec: 0.25, Note: "predicted to fail", Placement: "cross-node",
		Point: "streams=4,mtu=9000", Family: "ipv6", PolicyProvider: "nftables",
		Policies: &PolicyProof{Policies: 1000, IPBlocks: 100, LoadSec: 0.75, Objects: 2010, Want: 2010,
			Probe: "tcp [fd00::10]:9: dropped", ProbeDenied: 1, Evaluated: 12, NotApplied: "policy provider nftables evaluated none of the proof sample's packets"}, ClientNode: "node-1", ServerNode: "node-2", Addr: "fd00::10",
		Status: "worked-unexpectedly",
		Mean:   1.5, CI95: []float64{1, 2}, CIMethod: "bootstrap-median", CV: 0.47, Noisy: true,
		Latency: map[string]float64{"p50": 30.5, "p99": 48.25}, LatencySamples: map[string]int{"p50": 8000, "p99": 8000},
		LatencyTooFew: []string{"p99.9"}, CPU: cost, VsBaseline: cmp, VsPod: cmp,
		LatencyCI: map[string]QuantileCI{"p50": {Value: 30.5, CI: [2]float64{29.75, 31}}, "p99": {Value: 48.25}},
		RateMax:   &RateMax{Share: 0.5, ClosedLoop: []float64{4000, 4100.5, 3900}, Max: 4000, Offered: 2000, Error: "rate 50%: too high"},
		ModeFacts: map[string]string{"nf_call_iptables": "0"}, Nodes: 2, LabMode: "bridge",
		CPUAffinity: &CPUAffinity{Client: 1, Server: 1},
		Profile: &Profile{Hz: 997, CPUs: 2, Samples: 3988, DataPath: 2000, WallSec: 4.002, Unit: "transaction",
			Units: 123456, DataPathUS: 16.2,
			Stages:    []StageCost{{Stage: "tcp", Name: "TCP", Kind: "net", Samples: 500, US: 4.05, Share: 0.25}},
			Functions: []FunctionCost{{Name: "tcp_sendmsg", Stage: "tcp", Self: 40, Inclusive: 300, SelfUS: 0.32, InclusiveUS: 2.43}},
			Events:    []EventRate{{Name: "netif_rx", Count: 246912, PerUnit: 2}},
			Drops:     []EventRate{{Name: "no_socket", Count: 3, PerUnit: 0.0000243}},
			Lost:      1, Dir: "profiles",
			Files: &ProfileFiles{Pprof: "cell.pb.gz", Folded: "cell.folded", Flame: "cell.svg"}},
		ProfileSamples: []Sample{sample(3, RoundProfile)},
		Proofs: []KnobProof{{Knob: "mtu", Wanted: "9000", Got: "9000", Where: "eth0 (veth) in vnetlab-l-node1"},
			{Knob: "gro", Wanted: "185000", Got: "65536", Where: "eth0 (veth) in vnetlab-l-node1", NotApplied: "gro_max_size is 65536, not 185000 (the kernel ignored it)"}},
		Packets: &Packets{Sender: side("vnetlab-l-pod1", "eth0"), Receiver: side("vnetlab-l-pod2", "eth0"),
			Note: "client and server in one namespace: its loopback carries both directions, so the averages include the acknowledgements"},
		ProofSample: &proof,
		NotApplied:  "mtu 9000: the kernel kept 1500",
	}
	return &File{
		SchemaVersion: SchemaVersion,
		Metadata: Metadata{Vnetlab: "v0.42.0", Commit: "f5a51c4f5a51c4f5a51c4f5a51c4f5a51c4f5a51", Kernel: "6.18.44",
			CPUs: 2, CPUModel: "AMD EPYC", Emulation: "qemu TCG", Hostname: "vm",
			Tools:       map[string]string{"iperf3": "iperf 3.12 (cJSON 1.7.15)"},
			CommandLine: []string{"vnetlab", "run", "-f", "fixture.yaml"}, Scenario: "fixture.yaml",
			Start: t0, End: t0.Add(time.Hour),
			Settings: Settings{Duration: "2s", Repeat: 5, Warmup: 1, CVThreshold: 0.1,
				Baseline: "host", CIMethod: "bootstrap-median", CPUAffinity: "auto", Tolerance: 0.05,
				Knobs: map[string]string{"streams": "4", "size": "1", "mtu": "9000", "gso": "185000", "gro": "185000", "offload": "tso:off",
					"qdisc": "fq", "cc": "bbr", "load": "2", "rate": "20000", "policies": "1000", "ipblocks": "100"},
				PolicyProviders: []string{"nftables", "iptables"},
				Sweep:           &Sweep{Axes: []Axis{{Knobs: []string{"gso", "gro"}, Values: []string{"65536", "185000"}}}, Cross: true},
				Order:           "random", OrderSeed: 42, Precision: 0.02, MaxTime: "10m0s", Looks: []int{10, 24}, Duet: true},
			Skipped:  []Skipped{{Mode: "ipvlan", Provider: "ebpf", Reason: "ipvlan: not in this kernel"}},
			Cluster:  &cluster,
			Clusters: []Cluster{cluster},
		},
		Cells: []*Cell{cell},
	}
}

// The file's format is pinned: any change to what Write writes (a field
// renamed, added, removed, retagged, in this package or in a type it takes
// from another) fails here unless it comes with a new SchemaVersion.
func TestSchemaGolden(t *testing.T) {
	out := filepath.Join(t.TempDir(), "results.json")
	if err := Write(out, fixture()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	path := golden(SchemaVersion)
	if *update {
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("%s exists: schema version %d is written down; a changed format needs a new SchemaVersion", path, SchemaVersion)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: every schema version has its golden file (write it with -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the results file format changed: Write's output differs from %s at %s.\n"+
			"If the change is intended, bump results.SchemaVersion (now %d), add the new golden "+
			"(go test ./internal/results -run TestSchemaGolden -update writes %s), keep the old versions' files "+
			"readable (TestSchemaOldVersionsRead) and say what changed in docs/results-json.md; "+
			"otherwise keep the JSON as it was (names, omitempty)",
			path, firstDiff(got, want), SchemaVersion, golden(SchemaVersion+1))
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, strings.TrimSpace(a), strings.TrimSpace(b))
		}
	}
	return "the end"
}

// The fixture sets every field of every struct type the file holds at
// least once, so that a field added without a value in it (and so absent
// from the golden file) fails here.
func TestSchemaFixtureComplete(t *testing.T) {
	set := map[string]bool{}
	fields := map[string]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Value())
			}
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[time.Time]() {
				return
			}
			for i := range v.NumField() {
				f := v.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				name := v.Type().String() + "." + f.Name
				fields[name] = true
				if !v.Field(i).IsZero() && (v.Field(i).Kind() != reflect.Slice && v.Field(i).Kind() != reflect.Map || v.Field(i).Len() > 0) {
					set[name] = true
				}
				walk(v.Field(i))
			}
		}
	}
	walk(reflect.ValueOf(fixture()))
	for f := range fields {
		if !set[f] {
			t.Errorf("%s is zero everywhere in the fixture: give it a value (then the golden file changes: a new SchemaVersion)", f)
		}
	}
}

// Every schema version's golden file still reads: the current one back to
// the fixture, the older ones (written by vnetlab at that version) without
// error.
func TestSchemaOldVersionsRead(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "schema-v*.golden.json"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("golden files %v (%v): want one per schema version", paths, err)
	}
	re := regexp.MustCompile(`schema-v(\d+)\.golden\.json$`)
	for _, p := range paths {
		v, _ := strconv.Atoi(re.FindStringSubmatch(p)[1])
		f, err := Read(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if f.SchemaVersion != v || len(f.Cells) == 0 || len(f.Cells[0].Samples) == 0 {
			t.Errorf("%s: read as schema_version %d with %d cells", p, f.SchemaVersion, len(f.Cells))
		}
		if v == SchemaVersion && !reflect.DeepEqual(f, fixture()) {
			t.Errorf("%s reads back as another file than the fixture that wrote it", p)
		}
	}
}

// An older file's typed knobs read into the generic ones: its settings'
// streams, links, load, rate and policies into Settings.Knobs, a cell's
// links' proof into Cell.Proofs.
func TestSchemaOldKnobsRead(t *testing.T) {
	f, err := Read(golden(6))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"streams": "4", "size": "1", "mtu": "9000", "gso": "185000", "gro": "185000", "offload": "tso=off",
		"load": "2", "rate": "20000", "policies": "1000", "ipblocks": "100"}
	if got := f.Metadata.Settings.Knobs; !reflect.DeepEqual(got, want) {
		t.Errorf("settings' knobs %v, want %v", got, want)
	}
	c := f.Cells[0]
	wantProofs := []KnobProof{
		{Knob: "mtu", Wanted: "9000", Got: "9000", Where: "eth0 (veth) in vnetlab-l-node1"},
		{Knob: "gso", Wanted: "185000", Got: "185000", Where: "eth0 (veth) in vnetlab-l-node1"},
		{Knob: "gro", Wanted: "185000", Got: "185000", Where: "eth0 (veth) in vnetlab-l-node1"},
		{Knob: "offload", Wanted: "tso=off", Got: "gro:on (fixed)+tso:off", Where: "eth0 (veth) in vnetlab-l-node1"},
	}
	if !reflect.DeepEqual(c.Proofs, wantProofs) {
		t.Errorf("proofs %+v, want %+v", c.Proofs, wantProofs)
	}
	if c.NotApplied == "" {
		t.Error("the cell's not_applied is lost")
	}
}

package modes_test

// Integration tests of the same-host modes that start daemons (ovs,
// ovs-internal, tap-naive, tap-offload): real labs, real traffic, and
// nothing left behind: daemons stopped by lab.Down, TAPs and namespaces gone.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("topo integration tests need root (they build namespaces): skipped")
		os.Exit(0)
	}
	// The tap modes start `vnetlab tap-switch`: a Go test binary cannot be
	// that program, so build the real one unless make test gave it.
	if os.Getenv("VNETLAB_BIN") == "" {
		dir, err := os.MkdirTemp("", "vnetlab-topo")
		if err != nil {
			panic(err)
		}
		bin := filepath.Join(dir, "vnetlab")
		_, file, _, _ := runtime.Caller(0)
		out, err := exec.Command("go", "build", "-o", bin, filepath.Join(filepath.Dir(file), "..", "..", "..", "cmd", "vnetlab")).CombinedOutput()
		if err != nil {
			fmt.Printf("build vnetlab: %v\n%s", err, out)
			os.Exit(1)
		}
		os.Setenv("VNETLAB_BIN", bin)
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// upLab builds a two-pod lab and removes it when the test ends, pass or fail.
func upLab(t *testing.T, name, mode string, opts map[string]string) *lab.Lab {
	t.Helper()
	pods, err := lab.DefaultPodSpecs(2, lab.DefaultPodCIDR, 1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lab.Up(context.Background(), lab.Spec{Name: name, Mode: mode, Pods: pods, Options: opts}, nil)
	if err != nil {
		t.Fatalf("up %s: %v", mode, err)
	}
	t.Cleanup(func() {
		l.Release()
		if _, err := os.Stat(filepath.Join(lab.StateRoot, "labs", name)); err == nil {
			_ = lab.Down(name, nil)
		}
	})
	return l
}

func ping(t *testing.T, ns, addr string) {
	t.Helper()
	out, err := proc.Command(context.Background(), ns, "ping", "-c", "2", "-i", "0.2", "-W", "2", addr).Output()
	if err != nil || !strings.Contains(string(out), " 0% packet loss") {
		t.Errorf("ping %s from %s: %v\n%s", addr, ns, err, out)
	}
}

// daemon is a process found running inside the lab's node namespace.
type daemon struct {
	pid   int
	start uint64
	comm  string
}

// nodeDaemons lists the processes running in the lab's node namespaces.
func nodeDaemons(t *testing.T, l *lab.Lab) []daemon {
	t.Helper()
	var out []daemon
	for _, n := range l.State.Nodes {
		out = append(out, daemonsIn(t, n.NS)...)
	}
	return out
}

func daemonsIn(t *testing.T, ns string) []daemon {
	t.Helper()
	ino, err := nsutil.Inode(nsutil.Path(ns))
	if err != nil {
		t.Fatal(err)
	}
	var out []daemon
	for _, pid := range proc.InNamespace(ino) {
		start, err := proc.StartTime(pid)
		if err != nil {
			continue
		}
		// A process that has just exec'd shows an empty cmdline until the kernel
		// has laid out its arguments (its parent already saw exec succeed).
		var b []byte
		for try := 0; try < 100 && len(b) == 0; try++ {
			if try > 0 {
				time.Sleep(10 * time.Millisecond)
			}
			b, _ = os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		comm := filepath.Base(argv[0])
		if len(argv) > 1 && argv[1] == "tap-switch" {
			comm += " tap-switch"
		}
		out = append(out, daemon{pid, start, comm})
	}
	return out
}

// journaled checks each daemon is in the lab's journal (so that clean stops
// it after a kill -9 of vnetlab), and returns the daemon names.
func journaled(t *testing.T, l *lab.Lab, ds []daemon) []string {
	t.Helper()
	j, err := os.ReadFile(filepath.Join(lab.StateRoot, "labs", l.State.Name, "journal"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ds {
		if !strings.Contains(string(j), fmt.Sprintf("proc %d %d\n", d.pid, d.start)) {
			t.Errorf("%s (pid %d) runs in the node but is not in the journal:\n%s", d.comm, d.pid, j)
		}
		names = append(names, d.comm)
	}
	return names
}

// stream runs a 1 s iperf3 TCP stream over the lab's pod path.
func stream(t *testing.T, l *lab.Lab) { t.Helper(); streamPath(t, l, "pod") }

func streamPath(t *testing.T, l *lab.Lab, path string) {
	t.Helper()
	ep, ok := l.State.Paths[path]
	if !ok {
		t.Fatalf("%s has no path %q: %v", l.State.Mode, path, l.State.Paths)
	}
	d, _ := engine.Get("iperf3")
	r, err := d.Run(context.Background(), engine.Target{ServerNS: ep.ServerNS, ClientNS: ep.ClientNS, Addr: ep.Target},
		engine.Spec{Test: engine.TCPStream, Duration: time.Second})
	if err != nil {
		t.Fatalf("iperf3 over %s: %v", l.State.Mode, err)
	}
	if r.Value <= 0 || r.Bytes <= 0 {
		t.Errorf("iperf3 over %s moved nothing: %+v", l.State.Mode, r)
	}
	t.Logf("%s: %.2f Gbit/s (1 s, noisy machine: not a benchmark)", l.State.Mode, r.Value)
}

// downAndCheck removes the lab and checks the daemons and namespaces are gone.
func downAndCheck(t *testing.T, l *lab.Lab, ds []daemon) {
	t.Helper()
	name := l.State.Name
	l.Release()
	if err := lab.Down(name, nil); err != nil {
		t.Fatalf("down: %v", err)
	}
	// Stop waits for exit (a zombie counts); our reaper collects it right after.
	deadline := time.Now().Add(3 * time.Second)
	for _, d := range ds {
		for proc.Alive(d.pid, d.start) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if proc.Alive(d.pid, d.start) {
			t.Errorf("%s (pid %d) still running after down", d.comm, d.pid)
		}
	}
	nss := []string{l.State.Ext}
	for _, n := range l.State.Nodes {
		nss = append(nss, n.NS)
	}
	for _, p := range l.State.Pods {
		nss = append(nss, p.NS)
	}
	for _, ns := range nss {
		if nsutil.Exists(ns) {
			t.Errorf("namespace %s left after down", ns)
		}
	}
	if _, err := os.Stat(filepath.Join(lab.StateRoot, "labs", name)); err == nil {
		t.Errorf("state directory of %s left after down", name)
	}
}

func podLink(t *testing.T, l *lab.Lab, pod int) netlink.Link {
	t.Helper()
	h, err := nsutil.Handle(l.State.Pods[pod].NS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName(l.State.Pods[pod].Ifname)
	if err != nil {
		t.Fatalf("%s: %v", l.State.Pods[pod].Name, err)
	}
	return link
}

func TestOVSModes(t *testing.T) {
	if err := modes.OVSInstalled(); err != nil {
		t.Fatalf("ovs modes cannot be tested: %v", err)
	}
	wantDP, err := modes.ChooseDatapath("auto")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ mode, lab string }{{"ovs", "ov-ovs"}, {"ovs-internal", "ov-ovsint"}} {
		t.Run(tc.mode, func(t *testing.T) {
			l := upLab(t, tc.lab, tc.mode, nil)
			if got := l.State.Facts["datapath"]; got != wantDP {
				t.Errorf("facts datapath = %q, want %q", got, wantDP)
			}
			ds := nodeDaemons(t, l)
			names := journaled(t, l, ds)
			for _, want := range []string{"ovsdb-server", "ovs-vswitchd"} {
				if !strings.Contains(strings.Join(names, ","), want) {
					t.Errorf("no %s running in the node namespace (found %v)", want, names)
				}
			}
			// Private instance: every socket in the lab's directory.
			if _, err := os.Stat(filepath.Join(lab.StateRoot, "labs", tc.lab, "ovs", "db.sock")); err != nil {
				t.Errorf("private ovsdb socket: %v", err)
			}
			link := podLink(t, l, 0)
			switch tc.mode {
			case "ovs":
				if link.Type() != "veth" {
					t.Errorf("pod eth0 is a %s, want a veth", link.Type())
				}
				if wantDP == modes.DatapathNetdev {
					on, err := modes.TxChecksum(l.State.Pods[0].NS, "eth0")
					if err != nil || on {
						t.Errorf("netdev datapath: pod eth0 tx checksum offload on=%v (%v), want off", on, err)
					}
				}
			case "ovs-internal":
				// netdev: vswitchd's TAP; kernel datapath: an openvswitch device.
				if link.Type() != "tuntap" && link.Type() != "openvswitch" {
					t.Errorf("pod eth0 is a %s, want an OVS internal port", link.Type())
				}
			}
			ping(t, l.State.Pods[1].NS, l.State.Pods[0].IP)
			ping(t, l.State.Pods[0].NS, l.State.Gateway)
			ping(t, l.State.Pods[0].NS, "10.10.0.1") // through the node to the ext namespace
			stream(t, l)
			downAndCheck(t, l, ds)
		})
	}
}

func TestTapModes(t *testing.T) {
	for _, tc := range []struct {
		mode, lab string
		offload   bool
	}{{"tap-naive", "ov-tapn", false}, {"tap-offload", "ov-tapo", true}} {
		t.Run(tc.mode, func(t *testing.T) {
			l := upLab(t, tc.lab, tc.mode, nil)
			ds := nodeDaemons(t, l)
			names := journaled(t, l, ds)
			if len(ds) != 1 || ds[0].comm != "vnetlab tap-switch" {
				t.Fatalf("want exactly one vnetlab tap-switch in the node, found %v", names)
			}
			for i := range l.State.Pods {
				if link := podLink(t, l, i); link.Type() != "tuntap" {
					t.Errorf("%s eth0 is a %s, want a TAP", l.State.Pods[i].Name, link.Type())
				}
			}
			// The offload TAP advertises checksum offload (and TSO) to the pod's
			// stack; the naive one does not.
			on, err := modes.TxChecksum(l.State.Pods[0].NS, "eth0")
			if err != nil || on != tc.offload {
				t.Errorf("TAP tx checksum offload = %v (%v), want %v", on, err, tc.offload)
			}
			ping(t, l.State.Pods[1].NS, l.State.Pods[0].IP)
			ping(t, l.State.Pods[0].NS, l.State.Gateway)
			ping(t, l.State.Pods[0].NS, "10.10.0.1")
			stream(t, l)
			downAndCheck(t, l, ds)
		})
	}
}

// Stopping the forwarder removes the pods' TAPs: they live exactly as long
// as the process holding them, like a VM's TAP and qemu.
func TestTapsVanishWithForwarder(t *testing.T) {
	l := upLab(t, "ov-tapk", "tap-naive", nil)
	ds := nodeDaemons(t, l)
	if len(ds) != 1 {
		t.Fatalf("want one forwarder, found %+v", ds)
	}
	proc.Stop(ds[0].pid, ds[0].start, 2*time.Second)
	h, err := nsutil.Handle(l.State.Pods[0].NS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, err := h.LinkByName("eth0")
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pod-a's TAP still exists after its forwarder stopped")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Bad datapath options fail with one clear error and leave nothing behind.
func TestOVSBadDatapath(t *testing.T) {
	pods, _ := lab.DefaultPodSpecs(2, lab.DefaultPodCIDR, 1)
	cases := map[string]string{"bogus": "want auto, system or netdev"}
	if _, err := modes.ChooseDatapath("system"); err != nil {
		cases["system"] = "CONFIG_OPENVSWITCH"
	}
	for val, want := range cases {
		name := "ov-baddp"
		_, err := lab.Up(context.Background(), lab.Spec{Name: name, Mode: "ovs", Pods: pods, Options: map[string]string{"datapath": val}}, nil)
		if err == nil {
			_ = lab.Down(name, nil)
			t.Fatalf("datapath=%s: up succeeded", val)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("datapath=%s: error %q does not say %q", val, err, want)
		}
		if _, serr := os.Stat(filepath.Join(lab.StateRoot, "labs", name)); serr == nil {
			t.Errorf("datapath=%s: failed up left its state directory", val)
		}
	}
}

// host's "published" path (seed 004's docker --net=host reached from
// another host): the client runs in ext, the server in the node.
func TestHostPublishedPath(t *testing.T) {
	l := upLab(t, "o2-hostpub", "host", nil)
	ep := l.State.Paths["published"]
	if ep.ClientNS != l.State.Ext || ep.ServerNS != l.State.Nodes[0].NS || ep.Target != l.State.Nodes[0].IP {
		t.Errorf("published path %+v: want ext -> %s at %s", ep, l.State.Nodes[0].NS, l.State.Nodes[0].IP)
	}
	streamPath(t, l, "published")
}

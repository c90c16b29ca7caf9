package modes_test

// Integration tests of ovs and ovs-internal across two nodes (--nodes 2):
// a private Open vSwitch per node, pod-b (node2) reaches pod-a (node1) over
// the underlay eth1 or an OVS vxlan port, and lab.Down stops both nodes'
// daemons and removes every namespace.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// upCrossLab builds a two-node lab (pod-a on node1, pod-b on node2, the
// underlay shaped to 10gbit) and removes it when the test ends.
func upCrossLab(t *testing.T, name, mode string, opts map[string]string) *lab.Lab {
	t.Helper()
	pods, err := lab.DefaultPodSpecs(2, lab.DefaultPodCIDR, 2)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lab.Up(context.Background(), lab.Spec{Name: name, Mode: mode, Pods: pods, Options: opts, Nodes: 2, UnderlayRate: "10gbit"}, nil)
	if err != nil {
		t.Fatalf("up %s --nodes 2 %v: %v", mode, opts, err)
	}
	t.Cleanup(func() {
		l.Release()
		if _, err := os.Stat(filepath.Join(lab.StateRoot, "labs", name)); err == nil {
			_ = lab.Down(name, nil)
		}
	})
	return l
}

// nodeLink returns interface ifname of node i.
func nodeLink(t *testing.T, l *lab.Lab, i int, ifname string) netlink.Link {
	t.Helper()
	h, err := nsutil.Handle(l.State.Nodes[i].NS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName(ifname)
	if err != nil {
		t.Fatalf("%s: %s: %v", l.State.Nodes[i].Name, ifname, err)
	}
	return link
}

func txBytes(t *testing.T, l *lab.Lab, node int, ifname string) uint64 {
	t.Helper()
	return nodeLink(t, l, node, ifname).Attrs().Statistics.TxBytes
}

var txPktsRE = regexp.MustCompile(`tx pkts=(\d+)`)

// tunnelTxPackets reads how many packets node i's vxlan0 port sent, live
// from ovs-vswitchd (the database's statistics lag by up to 5 s).
func tunnelTxPackets(t *testing.T, l *lab.Lab, i int) int {
	t.Helper()
	mgmt := "unix:" + filepath.Join(lab.StateRoot, "labs", l.State.Name, "ovs-"+l.State.Nodes[i].Name, "ovsbr.mgmt")
	out, err := exec.Command("ovs-ofctl", "--timeout=5", "dump-ports", mgmt, "vxlan0").Output()
	if err != nil {
		t.Fatalf("ovs-ofctl dump-ports vxlan0 on %s: %v", l.State.Nodes[i].Name, err)
	}
	m := txPktsRE.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no tx counter in:\n%s", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func TestOVSAcrossNodes(t *testing.T) {
	if err := modes.OVSInstalled(); err != nil {
		t.Fatalf("ovs modes cannot be tested: %v", err)
	}
	wantDP, err := modes.ChooseDatapath("auto")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, mode, lab string
		opts            map[string]string
	}{
		{"ovs", "ovs", "o2-ovs", nil},
		{"ovs-vxlan", "ovs", "o2-ovsvx", map[string]string{"encap": "vxlan"}},
		{"ovs-internal", "ovs-internal", "o2-ovsint", nil},
		{"ovs-bridge-vxlan", "ovs", "o2-ovsbrvx", map[string]string{"encap": "vxlan", "linux_bridge": "on"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := upCrossLab(t, tc.lab, tc.mode, tc.opts)
			vxlan := tc.opts["encap"] == "vxlan"
			if got := l.State.Facts["datapath"]; got != wantDP {
				t.Errorf("facts datapath = %q, want %q", got, wantDP)
			}
			if l.State.Pods[0].Node != "node1" || l.State.Pods[1].Node != "node2" {
				t.Fatalf("pods placed on %s and %s, want node1 and node2", l.State.Pods[0].Node, l.State.Pods[1].Node)
			}
			// Each node runs its own pair of daemons with its own files.
			var ds []daemon
			for i, n := range l.State.Nodes {
				nd := daemonsIn(t, n.NS)
				names := strings.Join(journaled(t, l, nd), ",")
				for _, want := range []string{"ovsdb-server", "ovs-vswitchd"} {
					if strings.Count(names, want) != 1 {
						t.Errorf("%s runs %q, want one %s", n.Name, names, want)
					}
				}
				if _, err := os.Stat(filepath.Join(lab.StateRoot, "labs", tc.lab, "ovs-"+n.Name, "db.sock")); err != nil {
					t.Errorf("%s's private ovsdb socket: %v", n.Name, err)
				}
				// Open vSwitch must leave the underlay's tbf in place.
				qs, err := netlinkQdiscs(n.NS, nodeLink(t, l, i, "eth1"))
				if err != nil || !strings.Contains(qs, "tbf") {
					t.Errorf("%s eth1 qdiscs %q (%v): the 10gbit tbf is gone", n.Name, qs, err)
				}
				ds = append(ds, nd...)
			}
			if tc.mode == "ovs" && wantDP == modes.DatapathNetdev {
				for _, p := range l.State.Pods {
					if on, err := modes.TxChecksum(p.NS, "eth0"); err != nil || on {
						t.Errorf("netdev datapath: %s eth0 tx checksum offload on=%v (%v), want off", p.Name, on, err)
					}
				}
			}
			wantMTU := 1500
			if vxlan {
				wantMTU = modes.VxlanMTU
			}
			for i := range l.State.Pods {
				if mtu := podLink(t, l, i).Attrs().MTU; mtu != wantMTU {
					t.Errorf("%s eth0 mtu %d, want %d", l.State.Pods[i].Name, mtu, wantMTU)
				}
			}
			ping(t, l.State.Pods[1].NS, l.State.Pods[0].IP)
			ping(t, l.State.Pods[0].NS, "10.10.0.1") // through node1 to the ext namespace
			// A full-MTU frame, unfragmented, crosses too (with vxlan: the outer
			// packet fills the underlay's 1500 exactly).
			fullPing(t, l.State.Pods[1].NS, l.State.Pods[0].IP, wantMTU)
			if vxlan {
				if mtu := nodeLink(t, l, 0, "ovsbr").Attrs().MTU; mtu != modes.VxlanMTU {
					t.Errorf("node1 ovsbr (the gateway) mtu %d, want %d", mtu, modes.VxlanMTU)
				}
			}

			before := txBytes(t, l, 1, "eth1")
			vxBefore := 0
			if vxlan {
				vxBefore = tunnelTxPackets(t, l, 1)
			}
			stream(t, l)
			// pod-b is the client on node2: its data leaves node2 by eth1.
			if sent := txBytes(t, l, 1, "eth1") - before; sent < 1<<20 {
				t.Errorf("node2 eth1 sent %d bytes during the stream: traffic did not cross the underlay", sent)
			}
			if vxlan {
				if n := tunnelTxPackets(t, l, 1) - vxBefore; n < 100 {
					t.Errorf("node2 vxlan0 sent %d packets during the stream: the tunnel was bypassed", n)
				}
				if wantDP == modes.DatapathNetdev {
					// Userspace tunneling: the underlay address moved to ovsphy.
					addrs, _ := netlinkAddrs(l.State.Nodes[1].NS, "ovsphy")
					if !strings.Contains(addrs, "10.20.0.2/24") {
						t.Errorf("node2 ovsphy addresses %q, want 10.20.0.2/24", addrs)
					}
				}
			}
			downAndCheck(t, l, ds)
		})
	}
}

// fullPing pings with DF set and packets of exactly mtu bytes.
func fullPing(t *testing.T, ns, addr string, mtu int) {
	t.Helper()
	out, err := proc.Command(context.Background(), ns, "ping", "-c", "2", "-i", "0.2", "-W", "2", "-M", "do", "-s", strconv.Itoa(mtu-28), addr).Output()
	if err != nil || !strings.Contains(string(out), " 0% packet loss") {
		t.Errorf("ping -M do -s %d %s from %s: %v\n%s", mtu-28, addr, ns, err, out)
	}
}

func netlinkQdiscs(ns string, link netlink.Link) (string, error) {
	h, err := nsutil.Handle(ns)
	if err != nil {
		return "", err
	}
	defer h.Close()
	qs, err := h.QdiscList(link)
	var types []string
	for _, q := range qs {
		types = append(types, q.Type())
	}
	return strings.Join(types, ","), err
}

func netlinkAddrs(ns, ifname string) (string, error) {
	h, err := nsutil.Handle(ns)
	if err != nil {
		return "", err
	}
	defer h.Close()
	link, err := h.LinkByName(ifname)
	if err != nil {
		return "", err
	}
	as, err := h.AddrList(link, netlink.FAMILY_V4)
	var out []string
	for _, a := range as {
		out = append(out, a.IPNet.String())
	}
	return strings.Join(out, ","), err
}

// encap needs two nodes, a known value and no userspace TSO; each fails
// before anything stays.
func TestOVSBadEncap(t *testing.T) {
	for _, c := range []struct {
		opts  map[string]string
		nodes int
		want  string
	}{
		{map[string]string{"encap": "vxlan"}, 1, "add --nodes 2"},
		{map[string]string{"encap": "gre"}, 2, "want none or vxlan"},
		{map[string]string{"encap": "vxlan", "datapath": "netdev", "userspace_tso": "on"}, 2, "do not go together"},
	} {
		name, val, want := "o2-badenc", fmt.Sprint(c.opts), c.want
		pods, _ := lab.DefaultPodSpecs(2, lab.DefaultPodCIDR, c.nodes)
		_, err := lab.Up(context.Background(), lab.Spec{Name: name, Mode: "ovs", Pods: pods, Options: c.opts, Nodes: c.nodes}, nil)
		if err == nil {
			_ = lab.Down(name, nil)
			t.Fatalf("encap=%s on one node: up succeeded", val)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("encap=%s: error %q does not say %q", val, err, want)
		}
		if _, serr := os.Stat(filepath.Join(lab.StateRoot, "labs", name)); serr == nil {
			t.Errorf("encap=%s: failed up left its state directory", val)
		}
		if nsutil.Exists(lab.NSPrefix+name+"-node") || nsutil.Exists(lab.NSPrefix+name+"-node1") {
			t.Errorf("encap=%s: failed up left its node namespace", val)
		}
	}
}

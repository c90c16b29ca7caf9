package cni

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/vocab/field/fieldtest"
)

// The configuration a runtime hands the plugin on stdin, with the result of
// the ADD (prevResult) for CHECK, at each CNI version the plugin speaks.
// Accepted: every field checked, defaults filled in, and the configuration
// written back reads the same; its prevResult converts to the result type
// CHECK reads (types100), which written back reads the same, and CHECK
// takes its addresses (an IPv4 one in its prefix, an IPv6 one only with a
// mode that wires IPv6) or refuses with one line naming the IPAM plugin.
// Refused: a CNI error of one line naming the field, and no configuration.
func FuzzParseConf(f *testing.F) {
	base := `"cniVersion": "1.0.0", "name": "n", "type": "vnetlab-cni", "ipam": {"type": "host-local"}`
	for _, s := range []string{
		`{` + base + `, "mode": "veth-routed"}`,
		`{` + base + `, "mode": "veth-ebpf", "nodeNetns": "vnl-k-node1"}`,
		`{` + base + `, "mode": "bridge", "options": {"bridge_nf_call_iptables": "1"}, "mtu": 9000}`,
		`{` + base + `, "mode": "bridge", "options": {"stp": "on"}}`,
		`{` + base + `, "mode": "veth-routed", "plane": "../x"}`,
		`{` + base + `, "mode": "veth-routed", "stateDir": "rel"}`,
		`{"type": "vnetlab-cni", "mode": "veth-routed", "nodeNetns": "vnl-k-node1", "plane": "k-node1", "stateDir": "/run/vnetlab/labs/k/k-node1/cni-state", "cniVersion": "1.1.0",
		  "ipam": {"type": "host-local", "dataDir": "/run/vnetlab/labs/k/k-node1/cni-ipam", "ranges": [[{"subnet": "10.244.1.0/24"}]]}}`,
		`{` + base + `, "mode": "veth-routed", "prevResult": {"cniVersion": "1.0.0", "interfaces": [{"name": "eth0", "sandbox": "/var/run/netns/p"}],
		  "ips": [{"address": "10.244.1.2/24", "gateway": "10.244.1.1", "interface": 0}, {"address": "fd00:10:244:1::2/64", "interface": 0}],
		  "routes": [{"dst": "0.0.0.0/0", "gw": "10.244.1.1"}], "dns": {"nameservers": ["10.96.0.10"]}}}`,
		`{"cniVersion": "0.4.0", "name": "n", "type": "vnetlab-cni", "mode": "veth-routed", "ipam": {"type": "host-local"},
		  "prevResult": {"cniVersion": "0.4.0", "ips": [{"version": "4", "address": "10.244.1.2/24"}]}}`,
		`{` + base + `, "mode": "veth-routed", "prevResult": {"ips": [{"address": "fd00::2/64"}]}}`,
		`{` + base + `, "mode": "veth-routed", "prevResult": {"cniVersion": "9.9.9"}}`,
		`{"name": "n"}`,
		`not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		conf, mode, err := parseConf(data)
		if err != nil {
			if conf != nil {
				t.Fatalf("refused (%v) and yet a configuration: %+v", err, conf)
			}
			var te *types.Error
			if !errors.As(err, &te) {
				t.Fatalf("not a CNI error: %T %v", err, err)
			}
			if te.Code != types.ErrDecodingFailure && te.Code != types.ErrInvalidNetworkConfig {
				t.Fatalf("code %d: %v", te.Code, err)
			}
			if !strings.HasPrefix(te.Msg, "vnetlab-cni: ") {
				t.Fatalf("message does not say the plugin: %q", te.Msg)
			}
			fieldtest.OneLine(t, err)
			return
		}
		if mode.Attach == nil || mode.Name != conf.Mode {
			t.Fatalf("mode %q: %+v", conf.Mode, mode)
		}
		if conf.CNIVersion == "" || conf.IPAM.Type == "" || conf.NodeNetns == "" || !filepath.IsAbs(conf.StateDir) ||
			conf.Plane == "" || filepath.Base(conf.Plane) != conf.Plane || strings.HasPrefix(conf.Plane, ".") {
			t.Fatalf("accepted a configuration that breaks a rule: %+v", conf)
		}
		if conf.MTU != 0 && (conf.MTU < 576 || conf.MTU > 65535) {
			t.Fatalf("mtu %d accepted", conf.MTU)
		}
		if conf.RawPrevResult != nil {
			t.Fatalf("prevResult left unparsed: %v", conf.RawPrevResult)
		}
		// Written back (the defaults now explicit), the configuration reads the same.
		again := *conf
		again.PrevResult = nil
		b, err := json.Marshal(&again)
		if err != nil {
			t.Fatalf("write back: %v", err)
		}
		conf2, _, err := parseConf(b)
		if err != nil {
			t.Fatalf("written back %s: %v", b, err)
		}
		if !reflect.DeepEqual(&again, conf2) {
			t.Fatalf("round trip:\n%+v\n%+v", again, *conf2)
		}
		if conf.PrevResult == nil {
			return
		}
		// The prevResult chain: the result as CHECK converts it, written
		// back and read again; the addresses CHECK takes from it.
		prev, err := types100.NewResultFromResult(conf.PrevResult)
		if err != nil {
			fieldtest.OneLine(t, err)
			return
		}
		rb, err := json.Marshal(prev)
		if err != nil {
			t.Fatalf("write back prevResult: %v", err)
		}
		prev2, err := create.Create("1.0.0", rb)
		if err != nil {
			t.Fatalf("prevResult written back %s: %v", rb, err)
		}
		if rb2, err := json.Marshal(prev2); err != nil || !bytes.Equal(rb, rb2) {
			t.Fatalf("prevResult round trip:\n%s\n%s %v", rb, rb2, err)
		}
		a := &attachment{conf: conf, mode: mode, env: &modes.Env{}, pod: &modes.Pod{}}
		if err := a.takeAddress(prev); err != nil {
			fieldtest.OneLine(t, err)
			if !strings.Contains(err.Error(), "IPAM plugin") {
				t.Fatalf("error does not name the IPAM plugin: %v", err)
			}
			return
		}
		if a.pod.IP.To4() == nil || len(a.pod.IP) != net.IPv4len || a.env.PodNet == nil || !a.env.PodNet.Contains(a.pod.IP) {
			t.Fatalf("IPv4 address %v in %v", a.pod.IP, a.env.PodNet)
		}
		if a.pod.IP6 != nil && (a.pod.IP6.To4() != nil || !mode.IPv6 || !a.env.PodNet6.Contains(a.pod.IP6)) {
			t.Fatalf("IPv6 address %v in %v (mode %s)", a.pod.IP6, a.env.PodNet6, mode.Name)
		}
	})
}

// What the plugin reads of CNI_CONTAINERID and CNI_IFNAME (skel hands them
// over; the plugin passes CNI_ARGS on to the IPAM plugin unread): the node
// end's name, a valid interface name for any pair, one per pair.
func FuzzHostIfname(f *testing.F) {
	f.Add("c1", "eth0", "c1", "eth1")
	f.Add("2d2fa3b1c2a04b5fd0e1f09a63b3f15e1a2b3c4d5e6f708192a3b4c5d6e7f8091", "eth0", "", "")
	f.Add("a/b", "c", "a", "b/c")
	f.Fuzz(func(t *testing.T, id, ifname, id2, ifname2 string) {
		n := HostIfname(id, ifname)
		if len(n) != 14 || !strings.HasPrefix(n, hostIfPrefix) || strings.Trim(n[len(hostIfPrefix):], "0123456789abcdef") != "" {
			t.Fatalf("HostIfname(%q, %q) = %q: not vnl + 11 hex digits", id, ifname, n)
		}
		if HostIfname(id, ifname) != n {
			t.Fatal("not deterministic")
		}
		if id+"/"+ifname != id2+"/"+ifname2 && HostIfname(id2, ifname2) == n {
			t.Fatalf("%q/%q and %q/%q share %s", id, ifname, id2, ifname2, n)
		}
		if s := short(id); len(s) > 12 || !strings.HasPrefix(id, s) {
			t.Fatalf("short(%q) = %q", id, s)
		}
	})
}

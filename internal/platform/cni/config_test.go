package cni

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

// Each configuration problem is a CNI error naming its field.
func TestParseConfNamesTheField(t *testing.T) {
	base := `"cniVersion": "1.0.0", "name": "n", "type": "vnetlab-cni", "ipam": {"type": "host-local"}`
	for _, c := range []struct{ conf, field string }{
		{`{` + base + `}`, `"mode": missing`},
		{`{` + base + `, "mode": "macvlan"}`, `"mode": "macvlan" is not a mode`},
		{`{` + base + `, "mode": "bridge", "options": {"stp": "on"}}`, `"options.stp"`},
		{`{` + base + `, "mode": "bridge", "options": {"bridge_nf_call_iptables": "2"}}`, `"options.bridge_nf_call_iptables"`},
		{`{` + base + `, "mode": "veth-routed", "mtu": 70000}`, `"mtu"`},
		{`{` + base + `, "mode": "veth-routed", "plane": "../x"}`, `"plane"`},
		{`{` + base + `, "mode": "veth-routed", "stateDir": "rel"}`, `"stateDir"`},
		{`{"name": "n", "type": "vnetlab-cni", "mode": "veth-routed", "ipam": {"type": "host-local"}}`, `"cniVersion"`},
		{`{"cniVersion": "1.0.0", "name": "n", "type": "vnetlab-cni", "mode": "veth-routed"}`, `"ipam.type"`},
	} {
		_, _, err := parseConf([]byte(c.conf))
		var te *types.Error
		if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(te.Msg, c.field) {
			t.Errorf("%s: %v, want code %d naming %s", c.conf, err, types.ErrInvalidNetworkConfig, c.field)
		}
	}
	conf, m, err := parseConf([]byte(`{` + base + `, "mode": "veth-ebpf", "nodeNetns": "vnl-k-node1"}`))
	if err != nil || m.Name != "veth-ebpf" || conf.Plane != "vnl-k-node1" || conf.StateDir != defaultStateDir {
		t.Errorf("defaults: %+v %v", conf, err)
	}
}

func TestHostIfname(t *testing.T) {
	a, b := HostIfname("c1", "eth0"), HostIfname("c1", "eth1")
	if len(a) != 14 || a == b || a != HostIfname("c1", "eth0") || !strings.HasPrefix(a, hostIfPrefix) {
		t.Errorf("HostIfname: %q %q", a, b)
	}
}

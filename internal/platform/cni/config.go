package cni

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
)

// NetConf is the plugin's network configuration (one entry of a conflist),
// documented in docs/cni.md.
type NetConf struct {
	types.NetConf
	// Mode is the vnetlab mode that wires each pod (modes.AttachModes()).
	Mode string `json:"mode"`
	// Options are the mode's options (as `vnetlab up --option k=v`).
	Options map[string]string `json:"options,omitempty"`
	// NodeNetns is the node's network namespace: a /run/netns name or a
	// path; "" is the namespace the plugin runs in.
	NodeNetns string `json:"nodeNetns,omitempty"`
	// Plane names the eBPF data plane of the node (bpffs directory
	// /sys/fs/bpf/vnetlab/PLANE) for veth-ebpf; "" is derived from NodeNetns.
	Plane string `json:"plane,omitempty"`
	// MTU of the pods' links (0: 1500).
	MTU int `json:"mtu,omitempty"`
	// StateDir holds the plugin's lock (one ADD or DEL at a time per node).
	StateDir string `json:"stateDir,omitempty"`
}

// Defaults of the optional fields.
const (
	defaultStateDir = "/run/vnetlab/cni"
	selfNetns       = "/proc/self/ns/net"
	hostPlane       = "cni-host"
)

// configError is a CNI "invalid network config" error naming the field.
func configError(field, format string, a ...any) error {
	return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("vnetlab-cni: field %q: %s", field, fmt.Sprintf(format, a...)), "")
}

// parseConf decodes and checks the configuration before anything is
// touched: every error names the field and what would fix it.
func parseConf(data []byte) (*NetConf, modes.Mode, error) {
	conf := &NetConf{}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, modes.Mode{}, types.NewError(types.ErrDecodingFailure, "vnetlab-cni: the network configuration is not valid JSON: "+err.Error(), "")
	}
	if conf.CNIVersion == "" {
		return nil, modes.Mode{}, configError("cniVersion", "missing: say which CNI version the configuration follows (e.g. \"1.0.0\")")
	}
	if conf.Mode == "" {
		return nil, modes.Mode{}, configError("mode", "missing: choose one of %s", strings.Join(modes.AttachModes(), ", "))
	}
	m, err := modes.Get(conf.Mode)
	if err != nil || m.Attach == nil {
		return nil, modes.Mode{}, configError("mode", "%q is not a mode the plugin wires pods with: choose one of %s", conf.Mode, strings.Join(modes.AttachModes(), ", "))
	}
	for k, v := range conf.Options {
		o, ok := m.Option(k)
		if !ok {
			return nil, modes.Mode{}, configError("options."+k, "mode %s has no option %s", m.Name, k)
		}
		if o.Check != nil {
			if err := o.Check(v); err != nil {
				return nil, modes.Mode{}, configError("options."+k, "%v", err)
			}
		}
	}
	if conf.IPAM.Type == "" {
		return nil, modes.Mode{}, configError("ipam.type", "missing: name an IPAM plugin, e.g. {\"type\": \"host-local\", \"ranges\": [[{\"subnet\": \"10.244.1.0/24\"}]]}")
	}
	if conf.MTU < 0 || (conf.MTU > 0 && conf.MTU < 576) || conf.MTU > 65535 {
		return nil, modes.Mode{}, configError("mtu", "%d: want 576 to 65535 (or leave it out: 1500)", conf.MTU)
	}
	if conf.NodeNetns == "" {
		conf.NodeNetns = selfNetns
	}
	if conf.Plane == "" {
		conf.Plane = hostPlane
		if conf.NodeNetns != selfNetns {
			conf.Plane = filepath.Base(conf.NodeNetns)
		}
	}
	if filepath.Base(conf.Plane) != conf.Plane || strings.HasPrefix(conf.Plane, ".") {
		return nil, modes.Mode{}, configError("plane", "%q: want a plain name (a directory under /sys/fs/bpf/vnetlab)", conf.Plane)
	}
	if conf.StateDir == "" {
		conf.StateDir = defaultStateDir
	}
	if !filepath.IsAbs(conf.StateDir) {
		return nil, modes.Mode{}, configError("stateDir", "%q: want an absolute path", conf.StateDir)
	}
	if err := version.ParsePrevResult(&conf.NetConf); err != nil {
		return nil, modes.Mode{}, configError("prevResult", "%v", err)
	}
	if conf.PrevResult != nil {
		// The library takes an entry of ips without an address, or of
		// routes without a dst, and then writes it as "<nil>", which
		// nothing reads back.
		prev, err := types100.NewResultFromResult(conf.PrevResult)
		if err != nil {
			return nil, modes.Mode{}, configError("prevResult", "%v", err)
		}
		for i, ip := range prev.IPs {
			if ip.Address.IP == nil {
				return nil, modes.Mode{}, configError("prevResult", "ips[%d] has no address", i)
			}
		}
		for i, r := range prev.Routes {
			if r.Dst.IP == nil {
				return nil, modes.Mode{}, configError("prevResult", "routes[%d] has no dst", i)
			}
		}
	}
	return conf, m, nil
}

package knob

import (
	"fmt"
	"slices"
	"strings"
)

// Feature is an offload as ethtool's short names spell it (ethtool -K),
// standing for the kernel's feature strings (ETH_SS_FEATURES) it covers.
type Feature struct {
	Name    string
	Strings []string // the kernel's names; those a device lacks are skipped
	Help    string
}

// Features are the offloads the knob sets, in canonical order.
var Features = []Feature{
	{"gro", []string{"rx-gro"}, "generic receive offload (on a veth: also NAPI for the veth's receive)"},
	{"gso", []string{"tx-generic-segmentation"}, "generic segmentation offload"},
	{"tso", []string{"tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation"}, "TCP segmentation offload"},
	{"tx", []string{"tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6", "tx-checksum-sctp"}, "transmit checksum offload (off: TSO goes off too)"},
	{"rx", []string{"rx-checksum"}, "receive checksum offload"},
}

// FeatureList is the features' short names, comma-separated.
func FeatureList() string {
	var n []string
	for _, f := range Features {
		n = append(n, f.Name)
	}
	return strings.Join(n, ", ")
}

func featureByName(n string) (Feature, bool) {
	for _, f := range Features {
		if f.Name == n {
			return f, true
		}
	}
	return Feature{}, false
}

// Offloads are the features an offload value turns on (true) or off,
// by short name.
type Offloads map[string]bool

// ParseOffloads reads "gro:off+tso:on" (',' also separates); "" is none.
func ParseOffloads(v string) (Offloads, error) {
	out := Offloads{}
	for _, item := range strings.FieldsFunc(v, func(r rune) bool { return r == '+' || r == ',' }) {
		name, state, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, fmt.Errorf("offload %q: write each feature as NAME:on or NAME:off (features: %s), e.g. gro:off+tso:off", item, FeatureList())
		}
		if _, known := featureByName(name); !known {
			return nil, fmt.Errorf("offload %q: unknown feature %q (features: %s)", item, name, FeatureList())
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("offload %q sets %s twice", v, name)
		}
		switch state {
		case "on":
			out[name] = true
		case "off":
			out[name] = false
		default:
			return nil, fmt.Errorf("offload %q: %s must be on or off, not %q", item, name, state)
		}
	}
	return out, nil
}

// String is the canonical spelling: features in Features' order, joined by +.
func (o Offloads) String() string {
	var parts []string
	for _, f := range Features {
		if on, ok := o[f.Name]; ok {
			parts = append(parts, f.Name+":"+onOff(on))
		}
	}
	return strings.Join(parts, "+")
}

func canonicalOffload(v string) (string, error) {
	o, err := ParseOffloads(v)
	if err != nil {
		return "", err
	}
	if len(o) == 0 {
		return "", fmt.Errorf("offload %q names no feature (features: %s)", v, FeatureList())
	}
	return o.String(), nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Names are the short names set, in canonical order.
func (o Offloads) Names() []string {
	var n []string
	for _, f := range Features {
		if _, ok := o[f.Name]; ok {
			n = append(n, f.Name)
		}
	}
	return slices.Clip(n)
}

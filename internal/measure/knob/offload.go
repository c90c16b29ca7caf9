package knob

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Offload is the ethtool features of every link on the path.
const Offload Name = "offload"

func init() {
	register(Knob{Name: Offload, Scope: Lab, order: 60, Example: "gro:off", Applier: offload{},
		canonical: canonicalOffload,
		Help:      "ethtool features of every link on the path, e.g. gro:off+tso:off (features: " + FeatureList() + ")"})
}

// offload turns ethtool features on or off on every link.
type offload struct{}

func (offload) Set(p Path, v string) error {
	off, err := ParseOffloads(v)
	if err != nil {
		return err
	}
	return p.eachLink(func(l link, _ netlink.Link) error {
		if err := setFeatures(l.name, off); err != nil {
			return fmt.Errorf("offload %s refused: %w", off, err)
		}
		return nil
	})
}

// Read reads every feature of every link: got is each feature's state,
// "gro:on+gso:on+rx:on (fixed)+tso:off+tx:on" (by name; "mixed" over a
// feature's kernel strings; " (fixed)": the device cannot change it).
func (offload) Read(p Path, v string) ([]results.KnobProof, error) {
	off, _ := ParseOffloads(v)
	return p.readLinks(Offload, v, func(l link, _ netlink.Link) (string, string, error) {
		states, err := readFeatures(l.name)
		if err != nil {
			return "", "", err
		}
		got := results.FeatureStates(states)
		for _, name := range off.Names() {
			state := states[name]
			if want := onOff(off[name]); !strings.HasPrefix(state, want) {
				why := "the kernel keeps it, for a feature it depends on"
				if strings.HasSuffix(state, fixedSuffix) {
					why = "the device cannot change it"
				}
				return got, fmt.Sprintf("%s stays %s, not %s (%s)", name, strings.TrimSuffix(state, fixedSuffix), want, why), nil
			}
		}
		return got, "", nil
	})
}

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

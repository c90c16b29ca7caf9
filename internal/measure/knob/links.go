package knob

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Links are the knobs a lab's links take (the Links knobs): zero values
// leave the mode's own settings alone. Offload is canonical (Offloads).
type Links struct {
	MTU     int    `json:"mtu,omitempty"`
	GSO     int    `json:"gso_max_size,omitempty"`
	GRO     int    `json:"gro_max_size,omitempty"`
	Offload string `json:"offload,omitempty"`
}

// Check refuses a value out of its knob's range (0: not set), as a field
// error naming the knob's key.
func (l Links) Check() error {
	for _, k := range All {
		if k.Links {
			if err := k.Check(Settings{Links: l}); err != nil {
				return err
			}
		}
	}
	return nil
}

// IsZero says no knob is set.
func (l Links) IsZero() bool { return l == Links{} }

// String names the settings ("mtu=9000,gso=185000"; "" when none).
func (l Links) String() string {
	var s []string
	for _, k := range All {
		if v := k.Value(Settings{Links: l}); k.Links && v != "" && v != "0" {
			s = append(s, string(k.Name)+"="+v)
		}
	}
	return strings.Join(s, ",")
}

// Path says which links of a lab the knobs set, and how: every link of
// its namespaces but loopback, which is set only where it carries the
// test (host mode); behind a tunnel, every link but the underlay gets the
// MTU less the tunnel's overhead, as CNIs size a VXLAN overlay.
type Path struct {
	Namespaces []string
	Loopback   []string // namespaces whose lo is on the path
	// Tunnel is the encapsulation's overhead in bytes (0: none);
	// Underlay says which links carry the encapsulated packets.
	Tunnel   int
	Underlay func(ns, link string) bool
	// MaxMTU is the largest MTU the mode's data path carries (0: the
	// kernel's limits), and MaxMTUWhy why.
	MaxMTU    int
	MaxMTUWhy string
}

// LinkState is one link as the kernel reports it after the knobs were set.
type LinkState struct {
	NS             string `json:"ns"`
	Name           string `json:"name"`
	Kind           string `json:"kind"`
	MTU            int    `json:"mtu"`
	GSOMaxSize     uint32 `json:"gso_max_size"`
	GROMaxSize     uint32 `json:"gro_max_size"`
	GSOIPv4MaxSize uint32 `json:"gso_ipv4_max_size,omitempty"`
	GROIPv4MaxSize uint32 `json:"gro_ipv4_max_size,omitempty"`
	TSOMaxSize     uint32 `json:"tso_max_size,omitempty"`
	// Features: each offload's state by short name ("on", "off",
	// "mixed"), with " (fixed)" when the device cannot change it.
	Features map[string]string `json:"features,omitempty"`
}

// Proof is what a lab's links were asked and what the kernel kept.
type Proof struct {
	Requested Links       `json:"requested,omitempty"`
	Links     []LinkState `json:"links"`
	// NotApplied is why a requested setting is not in force on some
	// link: the kernel's refusal, or what it kept instead ("": all in force).
	NotApplied string `json:"not_applied,omitempty"`
}

// Apply sets l on the path's links, then reads every link back. A setting
// the kernel refuses or does not keep is the proof's NotApplied (the first
// one found), never an error: only failing to read the links is.
func Apply(p Path, l Links) (*Proof, error) {
	proof := &Proof{Requested: l}
	if l.MTU > 0 && p.MaxMTU > 0 && l.MTU-p.Tunnel > p.MaxMTU {
		proof.NotApplied = fmt.Sprintf("mtu %d: %s", l.MTU, p.MaxMTUWhy)
	} else if !l.IsZero() {
		proof.NotApplied = set(p, l)
	}
	var err error
	if proof.Links, err = Readback(p); err != nil {
		return nil, err
	}
	if proof.NotApplied == "" {
		proof.NotApplied = verify(p, l, proof.Links)
	}
	return proof, nil
}

// target is one link the knobs set.
type target struct {
	ns, name, kind string
	mtu            int
}

// order: stacked devices after the links they sit on (a macvlan's MTU
// cannot exceed its parent's), bridges after their ports.
func order(kind string) int {
	switch kind {
	case "macvlan", "macvtap", "ipvlan", "ipvtap", "vlan", "vxlan", "geneve":
		return 1
	case "bridge", "openvswitch":
		return 2
	}
	return 0
}

// targets lists the path's links in the order they are set.
func targets(p Path, l Links) ([]target, error) {
	var out []target
	for _, ns := range p.Namespaces {
		err := nsutil.Do(ns, func() error {
			links, err := netlink.LinkList()
			if err != nil {
				return err
			}
			for _, lk := range links {
				a := lk.Attrs()
				if a.Name == "lo" && !slices.Contains(p.Loopback, ns) {
					continue
				}
				t := target{ns: ns, name: a.Name, kind: lk.Type(), mtu: l.MTU}
				if l.MTU > 0 && p.Tunnel > 0 && (p.Underlay == nil || !p.Underlay(ns, a.Name)) {
					t.mtu = l.MTU - p.Tunnel
				}
				out = append(out, t)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("links of %s: %w", ns, err)
		}
	}
	slices.SortStableFunc(out, func(a, b target) int { return order(a.kind) - order(b.kind) })
	return out, nil
}

// set applies l link by link; the first refusal is returned ("": none).
func set(p Path, l Links) string {
	ts, err := targets(p, l)
	if err != nil {
		return err.Error()
	}
	// The kernel's own words (extended ack) in netlink errors.
	nl.EnableErrorMessageReporting = true
	var off Offloads
	if l.Offload != "" {
		if off, err = ParseOffloads(l.Offload); err != nil {
			return err.Error()
		}
	}
	for _, t := range ts {
		var why string
		err := nsutil.Do(t.ns, func() error {
			lk, err := netlink.LinkByName(t.name)
			if err != nil {
				return err
			}
			for _, s := range []struct {
				what string
				v    int
				set  func(netlink.Link, int) error
			}{
				{"mtu", t.mtu, netlink.LinkSetMTU},
				{"gso_max_size", l.GSO, netlink.LinkSetGSOMaxSize},
				{"gso_ipv4_max_size", l.GSO, netlink.LinkSetGSOIPv4MaxSize},
				{"gro_max_size", l.GRO, netlink.LinkSetGROMaxSize},
				{"gro_ipv4_max_size", l.GRO, netlink.LinkSetGROIPv4MaxSize},
			} {
				if s.v == 0 {
					continue
				}
				if err := s.set(lk, s.v); err != nil {
					why = fmt.Sprintf("%s %d refused: %v", s.what, s.v, err)
					return nil
				}
			}
			if len(off) > 0 {
				if err := setFeatures(t.name, off); err != nil {
					why = fmt.Sprintf("offload %s refused: %v", off, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Sprintf("%s in %s: %v", t.name, t.ns, err)
		}
		if why != "" {
			return fmt.Sprintf("%s (%s) in %s: %s", t.name, t.kind, t.ns, why)
		}
	}
	return ""
}

// Readback reads every link of the path's namespaces (loopback where it
// is on the path): MTU, GSO/GRO sizes, offloads.
func Readback(p Path) ([]LinkState, error) {
	ts, err := targets(p, Links{})
	if err != nil {
		return nil, err
	}
	var out []LinkState
	for _, t := range ts {
		err := nsutil.Do(t.ns, func() error {
			lk, err := netlink.LinkByName(t.name)
			if err != nil {
				return err
			}
			a := lk.Attrs()
			st := LinkState{NS: t.ns, Name: a.Name, Kind: lk.Type(), MTU: a.MTU, GSOMaxSize: a.GSOMaxSize, GROMaxSize: a.GROMaxSize,
				GSOIPv4MaxSize: a.GSOIPv4MaxSize, GROIPv4MaxSize: a.GROIPv4MaxSize, TSOMaxSize: a.TSOMaxSize}
			st.Features, err = readFeatures(a.Name)
			out = append(out, st)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("read back %s in %s: %w", t.name, t.ns, err)
		}
	}
	return out, nil
}

// verify compares what the kernel kept with what was asked ("": all kept).
func verify(p Path, l Links, got []LinkState) string {
	off, _ := ParseOffloads(l.Offload)
	for _, s := range got {
		where := fmt.Sprintf("%s (%s) in %s", s.Name, s.Kind, s.NS)
		if l.MTU > 0 {
			want := l.MTU
			if p.Tunnel > 0 && (p.Underlay == nil || !p.Underlay(s.NS, s.Name)) {
				want -= p.Tunnel
			}
			if s.MTU != want {
				return fmt.Sprintf("%s: mtu is %d, not %d: the kernel or the mode's daemon kept another value", where, s.MTU, want)
			}
		}
		for _, c := range []struct {
			what string
			want int
			got  uint32
		}{{"gso_max_size", l.GSO, s.GSOMaxSize}, {"gso_ipv4_max_size", l.GSO, s.GSOIPv4MaxSize},
			{"gro_max_size", l.GRO, s.GROMaxSize}, {"gro_ipv4_max_size", l.GRO, s.GROIPv4MaxSize}} {
			if c.want > 0 && int(c.got) != c.want {
				return fmt.Sprintf("%s: %s is %d, not %d (the kernel ignored it)", where, c.what, c.got, c.want)
			}
		}
		for _, name := range off.Names() {
			state := s.Features[name]
			if want := onOff(off[name]); !strings.HasPrefix(state, want) {
				why := "the kernel keeps it, for a feature it depends on"
				if strings.HasSuffix(state, fixedSuffix) {
					why = "the device cannot change it"
				}
				return fmt.Sprintf("%s: %s stays %s, not %s (%s)", where, name, strings.TrimSuffix(state, fixedSuffix), want, why)
			}
		}
	}
	return ""
}

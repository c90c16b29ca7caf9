package knob

import (
	"fmt"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Applier is how a lab knob reaches a lab and is proven there; each lab
// knob's file implements it.
type Applier interface {
	// Set puts value v (canonical, never "" nor Default) on the lab's
	// path. An error is a refusal (the kernel's, the mode's): the knob is
	// not applied, and the error says why in one line.
	Set(p Path, v string) error
	// Read is what the path holds, one proof per place the knob acts on,
	// each with Wanted v ("": not asked, the mode's own) and, where it
	// holds another value, why (NotApplied). An error is failing to read.
	Read(p Path, v string) ([]results.KnobProof, error)
}

// Path is a lab as its knobs see it: every link of its namespaces but
// loopback, which is on it only where it carries the test (host mode);
// behind a tunnel, every link but the underlay gets the MTU less the
// tunnel's overhead, as CNIs size a VXLAN overlay; the pods, each with
// its node.
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
	// Pods are the pods' interfaces and the namespaces of their nodes.
	Pods []Pod
}

// Pod is one pod's interface (Ifname in NS) and its node's namespace.
type Pod struct {
	NS, Ifname, NodeNS string
}

// Sockets are the namespaces the tests' sockets live in: the pods', or a
// podless mode's nodes (those whose loopback carries the test).
func (p Path) Sockets() []string {
	if len(p.Pods) == 0 {
		return p.Loopback
	}
	var out []string
	for _, pod := range p.Pods {
		out = append(out, pod.NS)
	}
	return out
}

// Proof is what a lab's knobs were asked and what the lab holds.
type Proof struct {
	Asked  Values              `json:"asked,omitempty"`
	Proofs []results.KnobProof `json:"proofs"`
	// NotApplied is why an asked knob is not in force somewhere: a
	// refusal, or what the kernel kept instead ("": all in force).
	NotApplied string `json:"not_applied,omitempty"`
}

// Apply sets the asked lab knobs on the path, in All's order, then reads
// every lab knob back. A knob refused or not kept is the proof's
// NotApplied (the first one found), never an error: only failing to read
// is.
func Apply(p Path, asked Values) (*Proof, error) {
	proof := &Proof{Asked: asked}
	// The kernel's own words (extended ack) in netlink errors.
	nl.EnableErrorMessageReporting = true
	for _, k := range labKnobs() {
		if v := asked.Get(k.Name); v != "" {
			if err := k.Applier.Set(p, v); err != nil && proof.NotApplied == "" {
				proof.NotApplied = err.Error()
			}
		}
	}
	var err error
	if proof.Proofs, err = Read(p, asked); err != nil {
		return nil, err
	}
	if proof.NotApplied == "" {
		if i := slices.IndexFunc(proof.Proofs, func(f results.KnobProof) bool { return f.NotApplied != "" }); i >= 0 {
			proof.NotApplied = proof.Proofs[i].Where + ": " + proof.Proofs[i].NotApplied
		}
	}
	return proof, nil
}

// Read is every lab knob read back from the path (asked: what each was
// asked, "" where none).
func Read(p Path, asked Values) ([]results.KnobProof, error) {
	var out []results.KnobProof
	for _, k := range labKnobs() {
		got, err := k.Applier.Read(p, asked.Get(k.Name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.Name, err)
		}
		out = append(out, got...)
	}
	return out, nil
}

func labKnobs() []Knob {
	var out []Knob
	for _, k := range All {
		if k.Scope == Lab {
			out = append(out, k)
		}
	}
	return out
}

// link is one link of the path.
type link struct {
	ns, name, kind string
	underlay       bool
}

// where names a link in proofs and refusals.
func (l link) where() string { return fmt.Sprintf("%s (%s) in %s", l.name, l.kind, l.ns) }

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

// links lists the path's links in the order they are set.
func (p Path) links() ([]link, error) {
	var out []link
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
				out = append(out, link{ns: ns, name: a.Name, kind: lk.Type(), underlay: p.Underlay != nil && p.Underlay(ns, a.Name)})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("links of %s: %w", ns, err)
		}
	}
	slices.SortStableFunc(out, func(a, b link) int { return order(a.kind) - order(b.kind) })
	return out, nil
}

// eachLink sets every link of the path with set (in its namespace, the
// link found by name); the first refusal is the error, naming its link.
func (p Path) eachLink(set func(l link, lk netlink.Link) error) error {
	ls, err := p.links()
	if err != nil {
		return err
	}
	for _, l := range ls {
		err := nsutil.Do(l.ns, func() error {
			lk, err := netlink.LinkByName(l.name)
			if err != nil {
				return err
			}
			return set(l, lk)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", l.where(), err)
		}
	}
	return nil
}

// readLinks is one proof per link of the path: got reads what the link
// holds, and says why it is not wanted ("" when it is, or nothing is).
func (p Path) readLinks(k Name, wanted string, got func(l link, lk netlink.Link) (value, notApplied string, err error)) ([]results.KnobProof, error) {
	ls, err := p.links()
	if err != nil {
		return nil, err
	}
	var out []results.KnobProof
	for _, l := range ls {
		f := results.KnobProof{Knob: string(k), Wanted: wanted, Where: l.where()}
		err := nsutil.Do(l.ns, func() error {
			lk, err := netlink.LinkByName(l.name)
			if err != nil {
				return err
			}
			f.Got, f.NotApplied, err = got(l, lk)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("read back %s: %w", l.where(), err)
		}
		out = append(out, f)
	}
	return out, nil
}

// Package labpolicy is a lab's NetworkPolicies: the model of
// internal/datapath/netpol filled with the lab's pods (their namespaces and
// labels as the lab's policy file gives them), kept in the lab's state
// directory (policies.json), and realised by a provider, one file each
// (nftables.go), registered as the lab's Service providers are
// (internal/platform/labservice). A provider receives the compiled rules
// (netpol.Rules), never a selector.
package labpolicy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// The providers' names (each registered from its own file).
const (
	NFTables = "nftables"
	IPTables = "iptables"
	EBPF     = "ebpf"
)

// DefaultProvider is the provider a lab gets when none is named.
const DefaultProvider = NFTables

// Provider realises a lab's compiled policies in its namespaces.
type Provider interface {
	// Info says what the provider is.
	Info() Info
	// Supports returns "" when the provider sees the packets of a lab of
	// mode m with options, else why not (one line).
	Supports(m modes.Mode, options map[string]string) string
	// Install loads r into a lab holding none of the provider's objects.
	Install(st *lab.State, r *netpol.Rules) error
	// Update changes the lab's objects from old to r.
	Update(st *lab.State, old, r *netpol.Rules) error
	// Remove deletes every object the provider created in the lab.
	Remove(st *lab.State) error
	// Prove reads the provider's objects back from every node of the lab
	// and its counters: that the compiled rules are in force, and how many
	// packets they looked at (the policies knob's proof, per cell).
	Prove(st *lab.State) (Proof, error)
}

// Proof is what a provider reads back from a lab's data plane.
type Proof struct {
	// Objects counts the provider's rules, set elements or map entries
	// read back from every node.
	Objects int
	// Evaluated counts the packets its rules or programs looked at since
	// it installed them; Denied, those it dropped.
	Evaluated, Denied uint64
}

// Info describes a provider; callers ask it, never compare the name.
type Info struct {
	Name string
	// Summary is one line for --help and docs.
	Summary string
}

var registry = map[string]Provider{}

// Register adds a provider (from each provider file's init).
func Register(p Provider) { registry[p.Info().Name] = p }

// Names lists the providers, sorted.
func Names() []string { return slices.Sorted(maps.Keys(registry)) }

// Get returns a provider by name.
func Get(name string) (Provider, error) {
	p, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy provider %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return p, nil
}

// Check says whether provider can enforce policies in lab st (its mode and
// options), before anything is built.
func Check(provider string, st *lab.State) error {
	p, err := Get(provider)
	if err != nil {
		return err
	}
	m, err := st.ModeOf()
	if err != nil {
		return fmt.Errorf("lab %s: %w", st.Name, err)
	}
	if why := p.Supports(m, st.Spec.Options); why != "" {
		return fmt.Errorf("policy provider %s cannot serve lab %s of mode %s: %s", provider, st.Name, m.Name, why)
	}
	if lc, ok := p.(labChecker); ok {
		if why := lc.CheckLab(st); why != "" {
			return fmt.Errorf("policy provider %s cannot serve lab %s: %s", provider, st.Name, why)
		}
	}
	return nil
}

// labChecker is implemented by a provider that needs more of a lab than
// its mode (the ebpf provider: how its Services are translated).
type labChecker interface {
	// CheckLab returns "" when the provider can serve lab st, else why not.
	CheckLab(st *lab.State) string
}

// nodeFilterSupports is the check of a provider whose rules sit in the
// node's netfilter: the mode's descriptor says whether the pods' packets
// cross it (modes.Policies).
func nodeFilterSupports(m modes.Mode, options map[string]string) string {
	if m.Podless {
		return "mode " + m.Name + " has no pods to isolate"
	}
	if m.Policies.NoNodeFilter != "" {
		return m.Policies.NoNodeFilter
	}
	if !m.Policies.NodeFilter {
		return "not wired for this mode yet (works with: " + strings.Join(modes.NamesWhere(func(m modes.Mode) bool { return m.Policies.NodeFilter }), ", ") + ")"
	}
	if m.Policies.NodeFilterOff != nil {
		return m.Policies.NodeFilterOff(options)
	}
	return ""
}

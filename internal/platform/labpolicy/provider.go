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
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/measure/profile"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
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
	// Update changes the lab's objects from old, the rules in force, to
	// r; changes are the pods whose rules differ (netpol.Diff(old, r)),
	// for a provider that writes only those.
	Update(st *lab.State, old, r *netpol.Rules, changes []netpol.PodChange) error
	// Remove deletes every object the provider created in the lab.
	Remove(st *lab.State) error
	// Prove reads the provider's objects back from every node of the lab
	// and its counters: that the compiled rules are in force (Objects
	// against Want), and how many packets they looked at (the policies
	// knob's proof, per cell: CellProof).
	Prove(st *lab.State) (Proof, error)
}

// Proof is what a provider reads back from a lab's data plane.
type Proof struct {
	// Objects counts the provider's rules, set elements or map entries
	// read back from every node (or wherever it keeps them); Want is how
	// many the lab's compiled rules make in the provider's shape (the
	// lab's saved policies compiled again: SavedRules). The policies are
	// in force only when the two are equal and not zero.
	Objects, Want int
	// Evaluated counts the packets its rules or programs decided on by
	// policy (not those an established flow's fast path passed) since it
	// installed them; Denied, those it dropped. Both only grow.
	Evaluated, Denied uint64
}

// Info describes a provider; callers ask it, never compare the name.
type Info struct {
	Name string
	// Summary is one line for --help and docs.
	Summary string
	// LoadRate is how many generated policies (or ipBlocks) a second the
	// provider loaded into a one-node lab here, at the largest count
	// measured (docs/policies.md); 0: not measured, no limit. CheckScale
	// refuses a set it would take over MaxLoadTime to load.
	LoadRate float64
	// Stages are the profile stages (internal/measure/profile's
	// stages.rules IDs) its rules and maps are evaluated in: the
	// enforcer's CPU in a profiled cell (EnforcerCPU).
	Stages []string
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

// EnforcerCPU is the CPU per unit of a profiled cell in the stages of
// policy provider name (Info.Stages; a cluster cell's is its enforcer's
// lab provider, results.File.PolicyLabProviderOf), and that CPU's share of
// the cell's data path; ok is false without a profile or a known provider.
// A stage holds other work too (a mode's own tc programs, a proxy's
// netfilter rules), so the enforcer's cost is read as the change from a
// sweep's first value.
func EnforcerCPU(name string, pr *results.Profile) (stages string, us, share float64, ok bool) {
	p, err := Get(name)
	if err != nil || pr == nil || pr.DataPathUS <= 0 {
		return "", 0, 0, false
	}
	var names []string
	for _, id := range p.Info().Stages {
		for _, st := range pr.Stages {
			if st.Stage == id {
				us += st.US
			}
		}
		names = append(names, profile.DefaultRules.Name(id))
	}
	return strings.Join(names, " + "), us, us / pr.DataPathUS, true
}

// SupportsMode says why provider cannot serve mode m with options ("":
// it can), for a run's plan before any lab is built.
func SupportsMode(provider string, m modes.Mode, options map[string]string) (string, error) {
	p, err := Get(provider)
	if err != nil {
		return "", err
	}
	return p.Supports(m, options), nil
}

// MaxLoadTime is the longest a provider may be expected to take loading a
// generated set (the policy knobs) before CheckScale refuses it.
const MaxLoadTime = 2 * time.Minute

// CheckScale refuses a generated set of policies and ipBlocks that
// provider would take over MaxLoadTime to load (per lab; its LoadRate).
func CheckScale(provider string, policies, ipblocks int) error {
	p, err := Get(provider)
	if err != nil {
		return err
	}
	rate, n := p.Info().LoadRate, policies+ipblocks
	if rate <= 0 {
		return nil
	}
	if est := time.Duration(float64(n) / rate * float64(time.Second)); est > MaxLoadTime {
		return fmt.Errorf("policy provider %s would take about %s to load %d policies and ipblocks into each lab (about %.0f a second, measured: docs/policies.md): use at most %d, or another provider",
			provider, est.Round(time.Second), n, rate, int(rate*MaxLoadTime.Seconds()))
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
	return m.NodeFilterUnseen(options)
}

package service

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/lab"
	"github.com/vnetlab/vnetlab/internal/modes"
)

// Provider realises a lab's services in its namespaces, one file per
// provider (iptables.go, nftables.go, ebpf_provider.go).
type Provider interface {
	Name() string
	// Summary is one line for --help.
	Summary() string
	// Supports returns "" when the provider can realise services in a lab of
	// this mode, else why not. A mode where services are expected to break
	// (bridge with bridge-nf-call-iptables=0) is supported: see Caveat.
	Supports(mode string) string
	// Install loads c into a lab holding none of the provider's objects yet.
	Install(st *lab.State, c *Config) error
	// Update changes the lab's objects from old (what Install or the last
	// Update loaded) to c, atomically where the tool allows.
	Update(st *lab.State, old, c *Config) error
	// Remove deletes every object the provider created in the lab.
	Remove(st *lab.State, c *Config) error
}

// Caveater is implemented by providers that know when the kernel will break
// their services on a lab that Supports accepts.
type Caveater interface {
	Caveat(mode string, options map[string]string) string
}

// DefaultProvider is kube-proxy's default mode.
const DefaultProvider = "iptables"

// DefaultProviderFor is the provider a lab of this mode gets when none is
// named: the eBPF modes come with vnetlab's eBPF Services built in.
func DefaultProviderFor(mode string) string {
	if ModeOwnsPrograms(mode) {
		return "ebpf"
	}
	return DefaultProvider
}

var registry = map[string]Provider{}

// Register adds a provider (from each provider file's init).
func Register(p Provider) { registry[p.Name()] = p }

// Get returns a provider by name.
func Get(name string) (Provider, error) {
	p, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return p, nil
}

// Names lists the providers, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(registry))
}

// podMode returns the lab's mode, or why a Service cannot exist in it
// (unknown, or no pods to put behind a clusterIP).
func podMode(name string) (modes.Mode, string) {
	m, err := modes.Get(name)
	if err != nil {
		return m, err.Error()
	}
	if m.Podless {
		return m, "mode " + name + " has no pods to put behind a clusterIP"
	}
	return m, ""
}

// notWired says which modes a provider works with, those for which works is true.
func notWired(works func(modes.Mode) bool) string {
	return "not wired for this mode yet (works with: " + strings.Join(modes.NamesWhere(works), ", ") + ")"
}

// Caveat returns why provider's services are expected to fail in a lab of
// this mode and options ("" when they should work).
func Caveat(provider, mode string, options map[string]string) string {
	p, err := Get(provider)
	if err != nil {
		return ""
	}
	if c, ok := p.(Caveater); ok {
		return c.Caveat(mode, options)
	}
	return ""
}

// Check says whether provider can serve a lab of mode.
func Check(provider, mode string) error {
	p, err := Get(provider)
	if err != nil {
		return err
	}
	if why := p.Supports(mode); why != "" {
		return fmt.Errorf("provider %s does not work with mode %s: %s", provider, mode, why)
	}
	return nil
}

// Commit applies c to the lab (from old, nil the first time) and saves it
// as the lab's services.json.
func Commit(st *lab.State, old, c *Config) error {
	if err := Apply(st, old, c); err != nil {
		return err
	}
	return c.Save(st.Name)
}

// Apply makes the lab match c with c's provider: Install the first time,
// Update from old afterwards. It records the load time in c (Commit also
// saves c).
func Apply(st *lab.State, old, c *Config) error {
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
	if err := Check(c.Provider, st.Mode); err != nil {
		return err
	}
	p, _ := Get(c.Provider)
	if c.Provider == "ebpf" && ModeOwnsPrograms(st.Mode) && !c.Installed {
		adoptModeEndpoints(st, c)
	}
	start := time.Now()
	var err error
	if c.Installed {
		if old == nil || !old.Installed || old.Provider != c.Provider {
			return fmt.Errorf("provider %s: internal error: update without the previous config", c.Provider)
		}
		err = p.Update(st, old, c)
	} else {
		if err = p.Install(st, c); err != nil {
			_ = p.Remove(st, c) // leave nothing half-built
		} else {
			c.Installed = true
		}
	}
	c.LoadSeconds = time.Since(start).Seconds()
	if err != nil {
		return fmt.Errorf("provider %s: %w", c.Provider, err)
	}
	return nil
}

// nodeNS is the first node's namespace.
func nodeNS(st *lab.State) (string, error) {
	if len(st.Nodes) == 0 {
		return "", fmt.Errorf("lab %s has no node", st.Name)
	}
	return st.Nodes[0].NS, nil
}

// eachNode runs fn for every node's namespace: node-level rules go on every
// node, as kube-proxy runs on each.
func eachNode(st *lab.State, fn func(ns string) error) error {
	if len(st.Nodes) == 0 {
		return fmt.Errorf("lab %s has no node", st.Name)
	}
	for _, n := range st.Nodes {
		if err := fn(n.NS); err != nil {
			return err
		}
	}
	return nil
}

// Path is the service path's endpoint: the second pod dials DefaultVIP,
// served by the first pod (seed 002: pod-b -> 10.96.0.100 -> pod-a).
func Path(st *lab.State) (server, client lab.PodState, err error) {
	if len(st.Pods) < 2 {
		return server, client, fmt.Errorf("lab %s has %d pods: the service path needs a client and a server pod", st.Name, len(st.Pods))
	}
	return st.Pods[0], st.Pods[1], nil
}

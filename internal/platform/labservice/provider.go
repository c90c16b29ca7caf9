package labservice

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// The providers' names (each registered from its own file).
const (
	IPTables = "iptables"
	NFTables = "nftables"
	EBPF     = "ebpf"
	EBPFSock = "ebpf-sock"
)

// Provider realises a lab's services in its namespaces, one file per
// provider (iptables.go, nftables.go, ebpf_provider.go, sock_provider.go).
type Provider interface {
	// Info says what the provider is and what it can do.
	Info() Info
	// Supports returns "" when the provider can realise services in a lab of
	// this mode, else why not. A mode where services are expected to break
	// (bridge with bridge-nf-call-iptables=0) is supported: see Caveat.
	Supports(m modes.Mode) string
	// Install loads c into a lab holding none of the provider's objects yet.
	Install(st *lab.State, c *Config) error
	// Update changes the lab's objects from old (what Install or the last
	// Update loaded) to c, atomically where the tool allows.
	Update(st *lab.State, old, c *Config) error
	// Remove deletes every object the provider created in the lab.
	Remove(st *lab.State, c *Config) error
}

// Info describes a provider: the CLI, the runner and the Service
// transaction ask these fields, never the provider's name (as modes.Mode
// does for modes).
type Info struct {
	Name string
	// Summary is one line for --help.
	Summary string
	// Endpoints: its programs sit on the pods' interfaces, attached per pod
	// (`ep add/del`; `up` and `run` attach every pod).
	Endpoints bool
	// ModePrograms: it fills the maps the programs of the eBPF modes
	// (veth-ebpf, macvlan-ebpf) read: it is those modes' default provider,
	// and their programs are its endpoints from the start.
	ModePrograms bool
	// KeepsEmptyServices: a Service without backends stays and its clients
	// are refused at once, as in Kubernetes (ebpf: ICMP port unreachable,
	// bpf/README.md; ebpf-sock: connect() fails with EPERM, bpf/sock.c).
	// The others have no rule for it, so they refuse such a Service.
	KeepsEmptyServices bool
	// IPv6: it realises IPv6 Services too, so it serves labs with IPv6
	// (ipv6 and dual; CheckFamily).
	IPv6 bool
	// NodeNAT: the node's netfilter translates a clusterIP, after the
	// packet left the pod's interface (a policy decided there would see
	// the clusterIP, not the backend; labpolicy's ebpf provider refuses it).
	NodeNAT bool
}

// Caveater is implemented by providers that know when the kernel will break
// their services on a lab that Supports accepts.
type Caveater interface {
	Caveat(m modes.Mode, options map[string]string) string
}

// DefaultProvider is kube-proxy's default mode.
const DefaultProvider = IPTables

// DefaultProviderFor is the provider a lab of mode m gets when none is
// named: the eBPF modes come with the provider of their own programs.
func DefaultProviderFor(m modes.Mode) string {
	if m.OwnsDataPlane() {
		for _, i := range Infos() {
			if i.ModePrograms {
				return i.Name
			}
		}
	}
	return DefaultProvider
}

var registry = map[string]Provider{}

// Register adds a provider (from each provider file's init).
func Register(p Provider) { registry[p.Info().Name] = p }

// Get returns a provider by name.
func Get(name string) (Provider, error) {
	p, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return p, nil
}

// Describe returns a provider's Info by name.
func Describe(name string) (Info, error) {
	p, err := Get(name)
	if err != nil {
		return Info{}, err
	}
	return p.Info(), nil
}

// Names lists the providers, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(registry))
}

// Infos lists every provider's Info, sorted by name.
func Infos() []Info {
	var out []Info
	for _, n := range Names() {
		out = append(out, registry[n].Info())
	}
	return out
}

// NamesWhere lists the providers (sorted) whose Info keep holds for.
func NamesWhere(keep func(Info) bool) []string {
	var n []string
	for _, i := range Infos() {
		if keep(i) {
			n = append(n, i.Name)
		}
	}
	return n
}

// NameList is the providers' names for a help text: "ebpf, ebpf-sock,
// iptables or nftables".
func NameList() string {
	n := Names()
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// podMode says why a Service cannot exist in a lab of mode m ("" when it
// can): no pods to put behind a clusterIP.
func podMode(m modes.Mode) string {
	if m.Podless {
		return "mode " + m.Name + " has no pods to put behind a clusterIP"
	}
	return ""
}

// notWired says which modes a provider works with, those for which works is true.
func notWired(works func(modes.Mode) bool) string {
	return "not wired for this mode yet (works with: " + strings.Join(modes.NamesWhere(works), ", ") + ")"
}

// Caveat returns why provider's services are expected to fail in a lab of
// mode m with options ("" when they should work).
func Caveat(provider string, m modes.Mode, options map[string]string) string {
	p, err := Get(provider)
	if err != nil {
		return ""
	}
	if c, ok := p.(Caveater); ok {
		return c.Caveat(m, options)
	}
	return ""
}

// Check says whether provider can serve a lab of mode m.
func Check(provider string, m modes.Mode) error {
	p, err := Get(provider)
	if err != nil {
		return err
	}
	if why := p.Supports(m); why != "" {
		return fmt.Errorf("provider %s does not work with mode %s: %s", provider, m.Name, why)
	}
	return nil
}

// CheckFamily refuses Services of provider in a lab with IPv6 (ipv6 or
// dual) unless the provider writes IPv6 rules or maps (Info.IPv6): a
// clusterIP that reached only some of a dual lab's families would
// measure half a path.
func CheckFamily(provider string, f family.Family) error {
	if i, err := Describe(provider); err == nil && f.HasIPv6() && !i.IPv6 {
		return field.Errorf("ip_family", "provider %s serves IPv4 only so far, not a lab with IPv6 (%s): use {ip_family} ipv4, or a provider with IPv6 (%s)", provider, f, strings.Join(NamesWhere(func(i Info) bool { return i.IPv6 }), ", "))
	}
	return nil
}

// CheckLab says whether provider can serve lab st (its mode and family as
// its state names them).
func CheckLab(provider string, st *lab.State) error {
	m, err := st.ModeOf()
	if err != nil {
		return fmt.Errorf("lab %s: %w", st.Name, err)
	}
	if err := CheckFamily(provider, st.Spec.Family); err != nil {
		return fmt.Errorf("lab %s: %w", st.Name, err)
	}
	return Check(provider, m)
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
	if err := CheckLab(c.Provider, st); err != nil {
		return err
	}
	p, _ := Get(c.Provider)
	if p.Info().ModePrograms && ownsPrograms(st) && !c.Installed {
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

// Path is the service path's endpoint: the second pod dials DefaultVIP,
// served by the first pod (seed 002: pod-b -> 10.96.0.100 -> pod-a).
func Path(st *lab.State) (server, client lab.PodState, err error) {
	if len(st.Pods) < 2 {
		return server, client, fmt.Errorf("lab %s has %d pods: the service path needs a client and a server pod", st.Name, len(st.Pods))
	}
	return st.Pods[0], st.Pods[1], nil
}

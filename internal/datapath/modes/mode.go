package modes

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// The modes' names: everything outside this package spells a mode with these.
const (
	Bridge      = "bridge"
	DockerNAT   = "docker-nat"
	Host        = "host"
	HostGW      = "host-gw"
	Ipvlan      = "ipvlan"
	Macvlan     = "macvlan"
	MacvlanEBPF = "macvlan-ebpf"
	Netkit      = "netkit"
	NetkitEBPF  = "netkit-ebpf"
	OVS         = "ovs"
	OVSInternal = "ovs-internal"
	TapNaive    = "tap-naive"
	TapOffload  = "tap-offload"
	VethEBPF    = "veth-ebpf"
	VethRouted  = "veth-routed"
	Vxlan       = "vxlan"
)

// Mode is everything vnetlab knows about one way of wiring pods to their
// node: one value per mode, registered from the mode's own file. The CLI,
// doctor, the lab builder and the Service providers ask it, never the name.
type Mode struct {
	Name string
	// Seeds are the seed articles whose recipe the mode follows.
	Seeds []Seed
	// Summary is one line for --help and doctor.
	Summary string
	// Requires lists the kernel features the mode cannot work without.
	Requires []kernel.Feature
	// Usable says whether more than kernel features is there (installed
	// programs, a data plane the kernel loads); nil: nothing more needed.
	Usable func() error
	// Detail says how the mode will be built on this machine (doctor shows
	// it, e.g. which Open vSwitch datapath); nil: nothing to add.
	Detail func() string
	// Options the mode takes (scenario `options:` / `--option k=v`).
	Options []Option
	// Build wires env.Pods to env.Node; the namespaces already exist.
	// Register sets AttachAll(Attach) when the mode has Attach and no Build.
	Build func(env *Env) error
	// Attach wires and unwires one pod at a time (attach.go): the modes the
	// CNI plugin offers; nil for modes that only build whole labs.
	Attach *Attach
	// MinNodes: nodes the mode needs (0: one).
	MinNodes int
	// MinPods: pods the mode needs; Register sets DefaultMinPods (a server
	// and a client) unless the mode is Podless or says otherwise.
	MinPods int
	// CrossHost: the mode can span nodes (--nodes 2).
	CrossHost bool
	// Podless: the mode attaches no pods (host: tests run in the nodes).
	Podless bool
	// MaxPods says how many pods a kernel limit lets the mode hold with the
	// given nodes and options, and why; nil: none below what a pod CIDR
	// holds (see limits.go).
	MaxPods PodLimit
	// Services says how a clusterIP reaches the mode's pods.
	Services Services
	// Policies says where a NetworkPolicy provider can see the pods' packets.
	Policies Policies
	// Links says what the knobs that set the lab's links must respect
	// (a tunnel's overhead, a userspace switch's frame size).
	Links Links
	// IPv6: the mode wires IPv6 pods too (--ip-family ipv6 and dual; its
	// IPv6 wiring is in the mode's NAME_ipv6.go); false: IPv4 only, and
	// up, run and doctor say so.
	IPv6 bool
}

// DefaultMinPods: a server pod and a client pod.
const DefaultMinPods = 2

// Seed is one of the seed articles vnetlab reproduces.
type Seed struct {
	Number string // "002"
	Title  string
}

// The seed articles, by the subject of each.
var (
	SeedInterfaces = Seed{"000", "Linux virtual network interfaces"}
	SeedLatency    = Seed{"001", "container network latency: veth vs ipvlan/macvlan"}
	SeedPodModes   = Seed{"002", "same-host pod connection modes, podIP vs clusterIP"}
	SeedBridgeOVS  = Seed{"003", "bridge vs Open vSwitch vs KVM, same host and across hosts"}
	SeedDocker     = Seed{"004", "Docker bridge vs host mode"}
)

func (s Seed) String() string { return "seed " + s.Number + " (" + s.Title + ")" }

// Reach is how a pod's packet to a clusterIP gets to something that can
// translate it.
type Reach int

const (
	// ReachNotWired: no packet-level provider is wired for the mode yet;
	// socket-level Services (ebpf-sock) still work, they need no packet path.
	ReachNotWired Reach = iota
	// ReachNodeNetfilter: the pods' packets cross the node's stack, so
	// kube-proxy's rules in the node (iptables, nftables) see them: veth
	// routing, a bridge with bridge-nf-call-iptables, or macvlan/ipvlan's
	// default route to the node's shim (seed 002).
	ReachNodeNetfilter
	// ReachModeDataPlane: the mode's own eBPF data plane translates, in the
	// programs it attached when it built the lab.
	ReachModeDataPlane
)

// EBPFAttach is where vnetlab's eBPF Service programs sit for a mode.
type EBPFAttach string

const (
	// EBPFNotWired: the ebpf provider does not serve the mode.
	EBPFNotWired EBPFAttach = ""
	// EBPFNodeVeth: the node end of each pod's veth (seed 002's veth+eBPF);
	// on a bridge port translated packets are switched to the backend.
	EBPFNodeVeth EBPFAttach = "node"
	// EBPFPodIf: the pod's own interface (seed 002's ipvlan+eBPF).
	EBPFPodIf EBPFAttach = "pod"
	// EBPFHostRouting: the node end of each pod's veth, also delivering
	// pod-to-pod packets with bpf_redirect_peer (veth-ebpf).
	EBPFHostRouting EBPFAttach = "routed"
	// EBPFPodL2: the pod's own interface, translated packets addressed to
	// the backend's MAC (macvlan-ebpf).
	EBPFPodL2 EBPFAttach = "pod-l2"
)

// Services is what the Service providers need to know about a mode.
type Services struct {
	Reach Reach
	// EBPF is where the ebpf provider attaches its programs.
	EBPF EBPFAttach
	// NoNetfilter says why the node's iptables/nftables cannot serve the
	// mode ("": they can where Reach is ReachNodeNetfilter).
	NoNetfilter string
	// NetfilterCaveat says why, with these options, netfilter Services are
	// expected to fail although the mode supports them ("": they work).
	NetfilterCaveat func(options map[string]string) string
	// NodeNote: what the mode's fast path hides from the node's own tools
	// (doctor shows it where the mode is available).
	NodeNote string
}

// Policies is what the NetworkPolicy providers (internal/platform/labpolicy)
// need to know about a mode.
type Policies struct {
	// NodeFilter: every packet between two pods, and between a pod and an
	// address outside the pods, crosses the netfilter forward hook of the
	// node namespace (routed there, or bridged with bridge-nf-call), so a
	// provider's rules in the node see it.
	NodeFilter bool
	// NoNodeFilter says why the node's netfilter does not see the pods'
	// packets ("" with NodeFilter false: no provider is wired for the mode yet).
	NoNodeFilter string
	// NodeFilterOff says why, with these options, the node's netfilter
	// misses the pods' packets although NodeFilter ("": it sees them).
	NodeFilterOff func(options map[string]string) string
	// PodIf: tc programs on each pod's own interface (its eth0, in its
	// namespace) see every packet the pod sends, before anything
	// translates it, and every packet it receives, after every
	// translation and redirect (bpf_redirect_peer included): the place of
	// the ebpf policy provider (internal/datapath/polbpf). Set for the
	// modes it is wired and tested on.
	PodIf bool
}

// NodeFilterUnseen says why policy rules in the node's netfilter would not
// see the packets of mode m's pods with options ("": they see them). The
// lab's node-filter policy providers and a cluster's node-filter
// enforcers both ask it.
func (m Mode) NodeFilterUnseen(options map[string]string) string {
	switch {
	case m.Podless:
		return "mode " + m.Name + " has no pods to isolate"
	case m.Policies.NoNodeFilter != "":
		return m.Policies.NoNodeFilter
	case !m.Policies.NodeFilter:
		return "not wired for this mode yet (works with: " + strings.Join(NamesWhere(func(m Mode) bool { return m.Policies.NodeFilter }), ", ") + ")"
	case m.Policies.NodeFilterOff != nil:
		return m.Policies.NodeFilterOff(options)
	}
	return ""
}

var registry = map[string]Mode{}

// Register adds a mode; called from each mode file's init. A duplicate or
// incomplete mode is a programming error: it panics at start-up.
func Register(m Mode) {
	if m.Build == nil && m.Attach != nil {
		m.Build = AttachAll(m.Attach)
	}
	if m.Name == "" || m.Build == nil || m.Summary == "" {
		panic(fmt.Sprintf("modes: mode %q needs a name, a summary and a build function", m.Name))
	}
	if _, dup := registry[m.Name]; dup {
		panic("modes: mode " + m.Name + " registered twice")
	}
	if m.MinPods == 0 && !m.Podless {
		m.MinPods = DefaultMinPods
	}
	registry[m.Name] = m
}

// Get returns a mode by name.
func Get(name string) (Mode, error) {
	m, ok := registry[name]
	if !ok {
		return Mode{}, fmt.Errorf("unknown mode %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return m, nil
}

// Names lists all known modes, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(registry))
}

// All returns every mode, sorted by name.
func All() []Mode {
	var ms []Mode
	for _, n := range Names() {
		ms = append(ms, registry[n])
	}
	return ms
}

// NamesWhere lists the modes (sorted) for which keep is true.
func NamesWhere(keep func(Mode) bool) []string {
	var n []string
	for _, m := range All() {
		if keep(m) {
			n = append(n, m.Name)
		}
	}
	return n
}

// CrossHostModes lists the modes that can span nodes.
func CrossHostModes() []string {
	return NamesWhere(func(m Mode) bool { return m.CrossHost })
}

// IPv6Modes lists the modes that wire IPv6 pods (Mode.IPv6).
func IPv6Modes() []string {
	return NamesWhere(func(m Mode) bool { return m.IPv6 })
}

// Available returns nil if the kernel has every feature the mode needs (and,
// for modes that also need programs, those are installed).
func Available(m Mode) error {
	for _, f := range m.Requires {
		if err := kernel.Check(f); err != nil {
			return err
		}
	}
	if m.Usable != nil {
		return m.Usable()
	}
	return nil
}

// Option returns the mode's option named k.
func (m Mode) Option(k string) (Option, bool) {
	for _, o := range m.Options {
		if o.Name == k {
			return o, true
		}
	}
	return Option{}, false
}

// OwnsDataPlane says whether the mode translates Services in programs it
// attached itself (the eBPF modes).
func (m Mode) OwnsDataPlane() bool { return m.Services.Reach == ReachModeDataPlane }

// Option documents one mode option (scenario `options:` / `--option k=v`).
type Option struct {
	Name, Default, Help string
	// Check validates a value before anything is built (nil: any value).
	Check func(string) error
}

// OnOff checks the values of the on/off option named key.
func OnOff(key string) func(string) error {
	return func(v string) error {
		_, err := ParseOnOff(key, v, false)
		return err
	}
}

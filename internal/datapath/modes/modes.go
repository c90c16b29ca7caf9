// Package modes wires pods to nodes. Each mode lives in its own file and
// follows the recipe of the seed article it comes from (named in a comment).
package modes

import (
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// NS is a namespace vnetlab created, with a netlink handle bound to it.
type NS struct {
	Name string // namespace name under /run/netns
	H    *netlink.Handle
}

// Pod is one pod namespace to be attached.
type Pod struct {
	NS
	Pod    string // pod name (pod-a)
	IP     net.IP
	Ifname string // interface inside the pod (eth0)
	Node   int    // index in Env.Nodes of the node it is attached to
	MTU    int    // link MTU (0: 1500)
	// IP6 is the pod's IPv6 address (ipv6 and dual labs; IP is nil in an
	// ipv6 lab).
	IP6 net.IP
	// HostIf names the node end of the pod's link ("": from the mode's
	// prefix and Pod, see HostIfname); the CNI plugin sets it.
	HostIf string
}

// Node is one emulated host.
type Node struct {
	NS
	Node       string     // node name (node, or node1, node2 with --nodes 2)
	IP         net.IP     // uplink (eth0) address
	UnderlayIP net.IP     // address on the node-to-node underlay (eth1), multi-node only
	PodNet     *net.IPNet // this node's share of the pod network
	// The IPv6 side (labs with IPv6): uplink and underlay addresses and
	// this node's share of the IPv6 pod network.
	IP6, UnderlayIP6 net.IP
	PodNet6          *net.IPNet
}

// Endpoint says where a test's server runs, where its client runs and which
// address the client dials, for one path (pod, service, published, ...).
type Endpoint struct {
	ServerNS string `json:"server_ns"`
	ClientNS string `json:"client_ns"`
	Target   string `json:"target"`
	// Target6 is the address to dial over IPv6 (labs with IPv6; in an
	// ipv6 lab Target is empty). Addr picks one by family.
	Target6 string `json:"target6,omitempty"`
	// ClientCgroup: the client runs in this cgroup v2 directory (the lab's,
	// for socket-level Services).
	ClientCgroup string `json:"client_cgroup,omitempty"`
	// Note explains the path in one line (shown by ls and in reports).
	Note string `json:"note,omitempty"`
}

// Env is what a mode gets to build with and what it reports back.
type Env struct {
	Lab    string
	Node   NS     // the (first) node; same-host modes build everything here
	NodeIP net.IP // node's uplink address (eth0)
	// Nodes lists every node; with --nodes 2 they are joined by a veth underlay
	// (Underlay names its interface in each node). Modes that can span nodes
	// say so (Mode.CrossHost).
	Nodes    []*Node
	Underlay string
	Uplink   string // node's uplink interface name
	Ext      NS     // the "outside world" namespace holding the node's default route
	ExtIP    net.IP
	Pods     []*Pod
	PodNet   *net.IPNet
	Options  map[string]string
	// Family is the lab's IP family; with IPv6, PodNet6 is the pods' IPv6
	// network and ExtIP6 the nodes' IPv6 gateway (family.go).
	Family  family.Family
	PodNet6 *net.IPNet
	ExtIP6  net.IP

	// StateDir is the lab's own directory (daemons' sockets, databases, logs).
	StateDir string
	// Track journals a process the mode started and leaves running, so that
	// down and clean stop it by PID (set by internal/platform/lab; see StartDaemon).
	Track func(pid int) error
	// TrackPin journals a bpffs path a mode pinned (eBPF modes), so that
	// down and clean remove it.
	TrackPin func(path string) error

	// Outputs.
	Gateway  string              // pods' default gateway
	Gateway6 string              // pods' IPv6 default gateway (labs with IPv6)
	Paths    map[string]Endpoint // filled by the mode (DefaultPaths if left empty)
	Facts    map[string]string   // anything else worth showing (published ports, ...)

	plane *tcbpf.Plane // opened by dataPlane, released by Close
	// bridgeGW6 is the IPv6 gateway the bridge being built holds (bridge_ipv6.go).
	bridgeGW6 net.IP
}

// Option returns a mode option or its default.
func (e *Env) Option(key, def string) string {
	if v, ok := e.Options[key]; ok && v != "" {
		return v
	}
	return def
}

// BoolOption parses on/off/true/false options.
func (e *Env) BoolOption(key string, def bool) (bool, error) {
	return ParseOnOff(key, e.Option(key, ""), def)
}

// ParseOnOff parses an on/off option value ("": def).
func ParseOnOff(key, v string, def bool) (bool, error) {
	switch strings.ToLower(v) {
	case "":
		return def, nil
	case "on", "true", "yes", "1":
		return true, nil
	case "off", "false", "no", "0":
		return false, nil
	}
	return false, fmt.Errorf("option %s=%q: want on or off", key, v)
}

// DefaultPaths: the server is the first pod, the client the second, dialing the pod IP.
func (e *Env) DefaultPaths() {
	if e.Paths == nil {
		e.Paths = map[string]Endpoint{}
	}
	if _, ok := e.Paths["pod"]; ok || len(e.Pods) < 2 {
		return
	}
	e.Paths["pod"] = Endpoint{ServerNS: e.Pods[0].Name, ClientNS: e.Pods[1].Name, Target: ipText(e.Pods[0].IP), Target6: ipText(e.Pods[0].IP6),
		Note: fmt.Sprintf("%s -> %s by pod IP", e.Pods[1].Pod, e.Pods[0].Pod)}
}

// ForNode returns a view of env restricted to node i and its pods, so that a
// cross-host mode can reuse same-host building blocks per node.
func (e *Env) ForNode(i int) *Env {
	n := e.Nodes[i]
	sub := *e
	sub.Node, sub.NodeIP, sub.PodNet, sub.PodNet6 = n.NS, n.IP, n.PodNet, n.PodNet6
	sub.Pods = nil
	for _, p := range e.Pods {
		if p.Node == i {
			sub.Pods = append(sub.Pods, p)
		}
	}
	sub.Paths, sub.Facts = nil, nil
	return &sub
}

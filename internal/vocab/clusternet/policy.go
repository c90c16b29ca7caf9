package clusternet

import (
	"fmt"
	"slices"
	"strings"
)

// The NetworkPolicy enforcers a local cluster can run (kube up
// --network-policy).
const (
	// PolicyVnetlab is vnetlab's policy controller (`vnetlab kube-netpol`
	// on every node: internal/kube/netpolicy), realising the netpol model
	// in the node's nftables.
	PolicyVnetlab = "vnetlab"
	// PolicyKubeRouter is kube-router's network policy controller (iptables
	// and ipset), built from its Go module and run as a DaemonSet with only
	// its firewall on.
	PolicyKubeRouter = "kube-router"
	// PolicyCilium is Cilium's agent's own enforcement (its policy maps,
	// read by its programs on every endpoint), with CNICilium.
	PolicyCilium = "cilium"
	// PolicyNone: nothing enforces NetworkPolicy (the objects are accepted
	// by the API server and have no effect).
	PolicyNone = "none"
)

// Enforcer is one NetworkPolicy enforcer and what it can do; code asks
// these fields, never the name.
type Enforcer struct {
	Name string
	// Summary is one line for --help.
	Summary string
	// Enforces: it enforces policies (PolicyNone does not).
	Enforces bool
	// CNI: the enforcer is this CNI's own (its agent enforces; no process
	// of its own): it runs only with that CNI ("": any).
	CNI string
	// Vnetlab: the nodes run vnetlab's own controller (`vnetlab kube-netpol`).
	Vnetlab bool
	// NodeFilter: its rules sit in the node's netfilter (forward hook), so
	// it sees a pod's packets only where the CNI passes them through it
	// (modes.Mode.Policies for vnetlab's CNI).
	NodeFilter bool
	// PodIf: where the CNI's mode has no node filter it puts programs on
	// each pod's own interface instead (modes.Mode.Policies.PodIf: vnetlab's
	// eBPF backend over internal/datapath/polbpf), which need the Services
	// translated by vnetlab's eBPF proxy (after the pod's interface, or at
	// its socket), never by the node's netfilter.
	PodIf bool
	// LabProvider is the lab policy provider (internal/platform/labpolicy's
	// name) with the same data path as its node filter rules;
	// PodIfLabProvider the one with the same data path as its programs on
	// the pods' interfaces ("": it has none). LabProviderFor chooses.
	LabProvider, PodIfLabProvider string
}

// LabProviderFor is the lab policy provider with the enforcer's data path
// on a cluster whose CNI mode makes it enforce on the pods' interfaces
// (podIf: kube up's choice, e.g. vnetlab's CNI in mode veth-ebpf) or in
// the node's netfilter.
func (e Enforcer) LabProviderFor(podIf bool) string {
	if podIf && e.PodIf {
		return e.PodIfLabProvider
	}
	return e.LabProvider
}

// Enforcers lists every enforcer.
var Enforcers = []Enforcer{
	{Name: PolicyVnetlab, Enforces: true, Vnetlab: true, NodeFilter: true, PodIf: true, LabProvider: "nftables", PodIfLabProvider: "ebpf",
		Summary: "vnetlab's controller on every node (vnetlab kube-netpol): the netpol model compiled into the node's nftables, or into eBPF programs on each pod's eth0 with --cni-mode veth-ebpf"},
	{Name: PolicyKubeRouter, Enforces: true, NodeFilter: true, LabProvider: "iptables",
		Summary: "kube-router's network policy controller (iptables + ipset), a DaemonSet with only its firewall on"},
	{Name: PolicyCilium, Enforces: true, CNI: CNICilium, LabProvider: "ebpf",
		Summary: "Cilium's agent's own (its policy maps, read by its programs on every pod's veth), with --cni cilium, whose default it is"},
	{Name: PolicyNone, Summary: "no NetworkPolicy enforcement"},
}

// Serves says whether the enforcer runs with CNI cni.
func (e Enforcer) Serves(cni string) bool { return e.CNI == "" || e.CNI == cni }

// EnforcerNames lists the enforcers' names in Enforcers' order.
func EnforcerNames() []string {
	var n []string
	for _, e := range Enforcers {
		n = append(n, e.Name)
	}
	return n
}

// GetEnforcer returns an enforcer by name.
func GetEnforcer(name string) (Enforcer, error) {
	i := slices.IndexFunc(Enforcers, func(e Enforcer) bool { return e.Name == name })
	if i < 0 {
		return Enforcer{}, fmt.Errorf("unknown NetworkPolicy enforcer %q (known: %s)", name, strings.Join(EnforcerNames(), ", "))
	}
	return Enforcers[i], nil
}

// EnforcerHelp is --network-policy's help: every enforcer with its summary.
func EnforcerHelp() string {
	var parts []string
	for _, e := range Enforcers {
		parts = append(parts, e.Name+" ("+e.Summary+")")
	}
	return "NetworkPolicy enforcer: " + strings.Join(parts, "; ")
}

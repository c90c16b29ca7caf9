package analysis

// Matching a lab's cells with a cluster's (`compare lab.json cluster.json`):
// a lab cell and a `kube run` cell mean the same path when the lab's mode is
// the shape of the cluster's CNI at that placement (vnetlab kube up's CNI
// bridge is the lab's bridge mode), the paths agree (a service cell only
// with the cluster's kube-proxy mode as its provider), a lab's policy cell
// has its provider with the data path of the cluster's enforcer
// (results.Cluster.PolicyLabProvider) at the same sweep point, and a
// two-node lab stands for cross-node. The lab's host mode (client and server in one node)
// is the cluster's host path (hostNetwork pods) on the same node.

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// Placements of a cluster run (internal/kube/measure's names).
const (
	sameNode  = "same-node"
	crossNode = "cross-node"
)

// cniShapes: for each CNI plugin a cluster reports (results.Cluster's
// CNIPlugin), the lab mode with the same data path per placement. Only
// shapes vnetlab builds the same way are listed; vnetlab's own plugin is
// its mode (LabClusterShape).
var cniShapes = map[string]map[string]string{
	clusternet.CNIBridge:  {sameNode: "bridge", crossNode: "host-gw"}, // vnetlab kube up: CNI bridge + host-local, routes between nodes
	clusternet.CNIFlannel: {sameNode: "bridge", crossNode: "vxlan"},   // cni0 + flannel.1 (vxlan backend, flannel's default)
	// The agent's programs on each pod's veth deliver to a pod of the same
	// node by redirect, as the lab's veth-ebpf does; across nodes it routes
	// natively, which no lab has.
	clusternet.CNICilium: {sameNode: "veth-ebpf"},
	"calico":             {sameNode: "veth-routed", crossNode: "veth-routed"},
	"kindnet":            {sameNode: "veth-routed", crossNode: "veth-routed"},
}

// LabClusterShape says, for the comparison of a lab and a cluster file, which
// lab mode stands for the cluster's CNI per placement; nil when the CNI is
// not one vnetlab knows. vnetlab's plugin wires a node's pods with a lab
// mode; across nodes the cluster routes each node's pod range to it
// (docs/cni.md), which only its bridge mode has a lab for (host-gw).
// flannel's backend (a local cluster's, or "" when detected) chooses its
// cross-node shape.
func LabClusterShape(n clusternet.Network) map[string]string {
	if n.CNI == clusternet.CNIVnetlab {
		cross := ""
		if n.CNIMode == "bridge" {
			cross = "host-gw"
		}
		return map[string]string{sameNode: n.CNIMode, crossNode: cross}
	}
	if n.CNI == clusternet.CNIFlannel && n.CNIMode == clusternet.FlannelHostGW {
		// cni0, and routes to each node's pod range via the node's address
		return map[string]string{sameNode: "bridge", crossNode: "host-gw"}
	}
	return cniShapes[n.CNI]
}

// ciliumBesideKubeProxy is the lab Service provider with the data path of
// Cilium's agent's Service balancing when kube-proxy runs beside it.
const ciliumBesideKubeProxy = "ebpf"

// labProvider is the lab Service provider with the data path of the
// cluster's proxy ("" when no lab provider has it: vnetlab-ebpf's socket LB
// is tc and socket programs at once).
func labProvider(n clusternet.Network) string {
	p, err := clusternet.GetProxy(n.Proxy)
	switch {
	case err != nil:
		return n.Proxy // a kube-proxy mode vnetlab does not run: its lab name, if any, is the same
	case n.SocketLB:
		return ""
	case n.CNI == clusternet.CNICilium && p.CNI == "":
		// Beside kube-proxy, Cilium's agent still balances its pods'
		// ClusterIP connections, per packet at their veths, before
		// kube-proxy's rules see them: vnetlab's tc proxy's shape.
		return ciliumBesideKubeProxy
	}
	return p.LabProvider
}

// clusterEquivalent is the ID a lab cell would have in the cluster's file,
// or false when the lab cell has no counterpart there.
func clusterEquivalent(c *results.Cell, cl *results.Cluster, clusterLabel string) (results.CellID, bool) {
	placement := sameNode
	if c.Nodes > 1 {
		placement = crossNode
	}
	// Of the same family and sweep point: a lab's IPv6 cell with the
	// cluster's IPv6 cell, its policies=100 cell with the cluster's.
	id := results.CellID{Mode: clusterLabel, Placement: placement, Family: c.Family, Test: c.Test, Point: c.Point}
	if c.ExtraServices != 0 {
		return id, false
	}
	if c.PolicyProvider != "" && c.PolicyProvider != cl.PolicyLabProvider {
		return id, false // another data path decides the lab's policies than the cluster's
	}
	n := cl.Network()
	mode := c.Mode
	if c.LabMode != "" && len(c.ModeOptions) == 0 {
		mode = c.LabMode // a label of the plain mode (kube.lab_same_node's host-1node); options make another path
	}
	switch {
	case mode == "host" && c.Path == "pod":
		id.Path = "host"
	case mode != LabClusterShape(n)[placement]:
		return id, false
	case c.Path == "pod":
		id.Path = "pod"
	case c.Path == "service" && c.Provider != "" && c.Provider == labProvider(n):
		id.Path = "service"
	default:
		return id, false
	}
	return id, true
}

// labClusterIDs gives the ID each file's cells are matched under when
// exactly one of the two files is a cluster's: a lab cell takes its
// counterpart's ID in the cluster file (else keeps its own). ok is false for
// two labs or two clusters (cells match by their own IDs).
func labClusterIDs(old, new *results.File) (oldID, newID func(*results.Cell) results.CellID, note string, ok bool) {
	own := func(c *results.Cell) results.CellID { return c.ID() }
	if (old.Metadata.Cluster == nil) == (new.Metadata.Cluster == nil) {
		return own, own, "", false
	}
	clusterFile := new
	if old.Metadata.Cluster != nil {
		clusterFile = old
	}
	cl := clusterFile.Metadata.Cluster
	label := cl.Name // the cells' mode; a --label run names them so
	if len(clusterFile.Cells) > 0 {
		label = clusterFile.Cells[0].Mode
	}
	mapped := func(c *results.Cell) results.CellID {
		if id, ok := clusterEquivalent(c, cl, label); ok {
			return id
		}
		return c.ID()
	}
	note = fmt.Sprintf("lab cells matched with cluster %s's by path: lab host = host (hostNetwork)", label)
	n := cl.Network()
	if shape := LabClusterShape(n); shape != nil {
		note += fmt.Sprintf(", lab %s = pod@same-node", shape[sameNode])
		if shape[crossNode] != "" {
			note += fmt.Sprintf(", lab %s with 2 nodes = pod@cross-node", shape[crossNode])
		}
		if p := labProvider(n); p != "" {
			note += fmt.Sprintf(", service(%s) = service", p)
		}
		if p := cl.PolicyLabProvider; p != "" {
			note += fmt.Sprintf(", policy provider %s = NetworkPolicy enforcer %s", p, n.Policy)
		}
		note += fmt.Sprintf(" (same shape as CNI %s, proxy %s)", cl.CNI, n.ProxyText())
	} else {
		note += fmt.Sprintf("; no lab mode has the shape of CNI %q, so the pod and service cells have no lab counterpart", cl.CNI)
	}
	if (n.CNI == clusternet.CNIBridge || n.CNI == clusternet.CNIFlannel) && !clusternet.IsVnetlab(n.Proxy) {
		// Why the same shape still differs (measured: docs/kubernetes-vs-lab.md);
		// flannel's pods share a node on cni0 as the default CNI's do.
		note += "; the cluster's nodes also run kube-proxy's netfilter rules, which bridged pod-to-pod packets traverse (br_netfilter): tcp_rr and tcp_crr pay for them, see docs/kubernetes-vs-lab.md"
	}
	if clusterFile == new {
		return mapped, own, note, true
	}
	return own, mapped, note, true
}

// SplitLabCluster splits a file that holds a lab's cells beside a
// cluster's (kube run with kube.lab: one run, both sides interleaved) into
// the lab's file and the cluster's, which Diff then pairs as it pairs two
// files; ok is false for a file of one side only. A cluster cell has a
// placement, a lab cell none.
func SplitLabCluster(f *results.File) (lab, cluster *results.File, ok bool) {
	if f.Metadata.Cluster == nil {
		return nil, nil, false
	}
	lab, cluster = &results.File{SchemaVersion: f.SchemaVersion, Metadata: f.Metadata}, &results.File{SchemaVersion: f.SchemaVersion, Metadata: f.Metadata}
	lab.Metadata.Cluster = nil
	for _, c := range f.Cells {
		if c.Placement == "" {
			lab.Cells = append(lab.Cells, c)
		} else {
			cluster.Cells = append(cluster.Cells, c)
		}
	}
	return lab, cluster, len(lab.Cells) > 0 && len(cluster.Cells) > 0
}

package analysis

// Matching a lab's cells with a cluster's (`compare lab.json cluster.json`):
// a lab cell and a `kube run` cell mean the same path when the lab's mode is
// the shape of the cluster's CNI at that placement (vnetlab kube up's CNI
// bridge is the lab's bridge mode), the paths agree (a service cell only
// with the cluster's kube-proxy mode as its provider) and a two-node lab
// stands for cross-node. The lab's host mode (client and server in one node)
// is the cluster's host path (hostNetwork pods) on the same node.

import (
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results"
)

// Placements of a cluster run (internal/kube/measure's names).
const (
	sameNode  = "same-node"
	crossNode = "cross-node"
)

// cniShapes: for each CNI a cluster reports (results.Cluster.CNI, first
// word before "+"), the lab mode with the same data path per placement.
// Only shapes vnetlab builds the same way are listed.
var cniShapes = map[string]map[string]string{
	"bridge":  {sameNode: "bridge", crossNode: "host-gw"}, // vnetlab kube up: CNI bridge + host-local, routes between nodes
	"flannel": {sameNode: "bridge", crossNode: "vxlan"},   // cni0 + flannel.1 (vxlan backend, flannel's default)
	"calico":  {sameNode: "veth-routed", crossNode: "veth-routed"},
	"kindnet": {sameNode: "veth-routed", crossNode: "veth-routed"},
}

// LabClusterShape says, for the comparison of a lab and a cluster file, which
// lab mode stands for the cluster's CNI per placement; "" when the CNI is
// not one vnetlab knows.
func LabClusterShape(cl *results.Cluster) map[string]string {
	cni, _, _ := strings.Cut(cl.CNI, "+")
	return cniShapes[cni]
}

// clusterEquivalent is the ID a lab cell would have in the cluster's file,
// or false when the lab cell has no counterpart there.
func clusterEquivalent(c *results.Cell, cl *results.Cluster, clusterLabel string) (results.CellID, bool) {
	placement := sameNode
	if c.Nodes > 1 {
		placement = crossNode
	}
	id := results.CellID{Mode: clusterLabel, Placement: placement, Test: c.Test}
	if c.ExtraServices != 0 {
		return id, false
	}
	switch {
	case c.Mode == "host" && c.Path == "pod":
		id.Path = "host"
	case c.Mode != LabClusterShape(cl)[placement]:
		return id, false
	case c.Path == "pod":
		id.Path = "pod"
	case c.Path == "service" && c.Provider == cl.KubeProxyMode:
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
	if shape := LabClusterShape(cl); shape != nil {
		note += fmt.Sprintf(", lab %s = pod@same-node, lab %s with 2 nodes = pod@cross-node, service(%s) = service (same shape as CNI %s)",
			shape[sameNode], shape[crossNode], cl.KubeProxyMode, cl.CNI)
	} else {
		note += fmt.Sprintf("; no lab mode has the shape of CNI %q, so the pod and service cells have no lab counterpart", cl.CNI)
	}
	// Why the same shape still differs (measured: docs/kubernetes.md).
	note += "; the cluster's nodes also run kube-proxy's netfilter rules, which bridged pod-to-pod packets traverse (br_netfilter): tcp_rr and tcp_crr pay for them, see docs/kubernetes.md"
	if clusterFile == new {
		return mapped, own, note, true
	}
	return own, mapped, note, true
}

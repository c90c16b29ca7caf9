package proxy

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// Node is where a proxy runs, as its Service translation reads it: the
// node's Kubernetes name (internalTrafficPolicy Local, node hints) and its
// zone, the Node's topology.kubernetes.io/zone label (zone hints; "": none).
type Node struct {
	Name, Zone string
}

// ZoneOf is a Node object's zone label.
func ZoneOf(n *corev1.Node) string {
	if n == nil {
		return ""
	}
	return n.Labels[corev1.LabelTopologyZone]
}

// topology is how one Service port's cluster endpoints are narrowed on a
// node, kube-proxy's topology mode (pkg/proxy/topology.go).
type topology int

const (
	topoAll  topology = iota // every ready endpoint
	topoNode                 // the ready endpoints hinted for this node
	topoZone                 // the ready endpoints hinted for this node's zone
)

// topologyOf reads the hints of one Service port's ready endpoints of one
// family, as kube-proxy does. The EndpointSlice controller writes them:
// zone hints for trafficDistribution PreferSameZone (and its older name
// PreferClose) and for the service.kubernetes.io/topology-mode: Auto
// annotation, node hints (and zone hints) for PreferSameNode; the proxy
// reads only the hints. Node hints count when every ready endpoint has
// some and one names this node; else zone hints, when every ready endpoint
// has some and one names this node's zone; else every endpoint. So a
// node or zone without a hinted endpoint, or a slice written before the
// hints, falls back to all of them.
func topologyOf(sp corev1.ServicePort, eps []*discoveryv1.EndpointSlice, at Node, v6 bool) topology {
	ready, allNode, forNode, allZone, forZone := false, true, false, true, false
	eachEndpoint(sp, eps, v6, func(e *discoveryv1.Endpoint, _ tcbpf.Backend) {
		if !isTrue(e.Conditions.Ready, true) {
			return
		}
		ready = true
		if len(nodeHints(e)) == 0 {
			allNode = false
		} else if hinted(nodeHints(e), at.Name) {
			forNode = true
		}
		if len(zoneHints(e)) == 0 {
			allZone = false
		} else if hinted(zoneHints(e), at.Zone) {
			forZone = true
		}
	})
	switch {
	case !ready:
		return topoAll
	case allNode && forNode:
		return topoNode
	case allZone && forZone:
		return topoZone
	}
	return topoAll
}

// serves says whether a ready endpoint is among those of topology t.
func (t topology) serves(e *discoveryv1.Endpoint, at Node) bool {
	switch t {
	case topoNode:
		return hinted(nodeHints(e), at.Name)
	case topoZone:
		return hinted(zoneHints(e), at.Zone)
	}
	return true
}

func nodeHints(e *discoveryv1.Endpoint) []string {
	if e.Hints == nil {
		return nil
	}
	var out []string
	for _, h := range e.Hints.ForNodes {
		out = append(out, h.Name)
	}
	return out
}

func zoneHints(e *discoveryv1.Endpoint) []string {
	if e.Hints == nil {
		return nil
	}
	var out []string
	for _, h := range e.Hints.ForZones {
		out = append(out, h.Name)
	}
	return out
}

// hinted: name is one of the hints (never the empty name: a node without a
// zone matches no zone hint).
func hinted(hints []string, name string) bool { return name != "" && slices.Contains(hints, name) }

package cluster

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Zones on a local cluster (kube up --zones N): node i is in zone
// "zone-((i-1) mod N + 1)" of region Region, labelled by its kubelet
// (--node-labels: topology.kubernetes.io/zone and region, labels a kubelet
// may set on its own Node). Topology-aware routing (trafficDistribution,
// EndpointSlice hints) and upstream's Traffic Distribution and Topology
// Hints specs need them: those skip with "Requires >= 3 zones" without.
const (
	Region     = "local"
	zonePrefix = "zone-"
	FactZones  = "zones" // the number of zones, when --zones was given
)

// ZoneOf is node i's zone (1-based) on a cluster of zones zones ("": none).
func ZoneOf(i, zones int) string {
	if zones < 1 {
		return ""
	}
	return zonePrefix + strconv.Itoa((i-1)%zones+1)
}

// nodeLabels is kubelet's --node-labels value for node i ("": none).
func (s Spec) nodeLabels(i int) string {
	z := ZoneOf(i, s.Zones)
	if z == "" {
		return ""
	}
	return fmt.Sprintf("%s=%s,%s=%s", corev1.LabelTopologyZone, z, corev1.LabelTopologyRegion, Region)
}

// validateZones: 0 (no zone labels) up to one zone per node.
func (s Spec) validateZones() error {
	if s.Zones < 0 || s.Zones > s.Nodes {
		return field.Errorf("zones", "{zones} %d: 0 (no zone labels) to {nodes} (%d), one zone or more per node", s.Zones, s.Nodes)
	}
	return nil
}

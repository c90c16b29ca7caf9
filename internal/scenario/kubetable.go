package scenario

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// KubeCluster is one configuration of a `kube.clusters` table: a local
// cluster `kube run` brings up (or reuses), measures and removes. Its name
// is the mode of its cells ("bridge-ipt/service@same-node/tcp_crr").
type KubeCluster struct {
	Name    string `yaml:"name"`
	Cluster string `yaml:"cluster"` // the local cluster's name (default kt1, kt2, ... by position)
	CNI     string `yaml:"cni"`     // kube up --cni (default bridge)
	CNIMode string `yaml:"cni_mode"`
	// FlannelBackend: kube up --flannel-backend (with cni flannel).
	FlannelBackend string `yaml:"flannel_backend"`
	Proxy          string `yaml:"proxy"` // kube up --proxy (default iptables)
	Nodes          int    `yaml:"nodes"` // default 2
	// SocketLB: kube up --socket-lb (with proxy vnetlab-ebpf).
	SocketLB bool `yaml:"socket_lb"`
	// NetworkPolicy: kube up --network-policy.
	NetworkPolicy string `yaml:"network_policy"`
	// ExtraServices overrides kube.extra_services for this configuration
	// (0: none).
	ExtraServices *int `yaml:"extra_services"`
}

// Spec is what `kube up` builds for the configuration.
func (c KubeCluster) Spec() cluster.Spec {
	return cluster.Spec{Name: c.Cluster, Nodes: c.Nodes, Proxy: c.Proxy, CNI: c.CNI, CNIMode: c.CNIMode, FlannelBackend: c.FlannelBackend, SocketLB: c.SocketLB, NetworkPolicy: c.NetworkPolicy}
}

// DefaultExtraTests are the tests measured again with kube.extra_services
// Services present (tcp_crr at 10k Services).
var DefaultExtraTests = []string{string(engine.TCPCRR)}

// maxExtraServices keeps a typo from asking the API server for millions.
const maxExtraServices = 50000

// configNameRE: a configuration's name is one segment of a cell name
// (CONFIG/path/test), so no '/' and no spaces.
var configNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.+_-]{0,39}$`)

// Tabled says whether the file names several cluster configurations.
func (k *Kube) Tabled() bool { return k != nil && len(k.Clusters) > 0 }

// ExtraFor is how many extra Services configuration c is measured with.
func (k *Kube) ExtraFor(c KubeCluster) int {
	if c.ExtraServices != nil {
		return *c.ExtraServices
	}
	return k.ExtraServices
}

// ExtraTestList is kube.extra_tests or its default.
func (k *Kube) ExtraTestList() []string {
	if len(k.ExtraTests) > 0 {
		return k.ExtraTests
	}
	return DefaultExtraTests
}

// validateClusters checks kube.clusters and fills its defaults.
func (s *Scenario) validateClusters() error {
	k := s.Kube
	if n := s.kubeNode("clusters"); n != nil && n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		return s.kubeErrAt("clusters", -1, "empty list: name at least one configuration {name, cni, cni_mode, proxy}")
	}
	if !k.Tabled() {
		for _, key := range []string{"extra_services", "extra_tests"} {
			if s.kubeNode(key) != nil {
				return s.kubeErrAt(key, -1, "applies to the configurations of kube.clusters: add kube.clusters, or remove it")
			}
		}
		return nil
	}
	for _, key := range []string{"cluster", "kubeconfig", "context", "label", "nodes"} {
		if s.kubeNode(key) != nil {
			return s.kubeErrAt(key, -1, "kube.clusters brings up its own clusters: set cluster/nodes per configuration (kube.clusters[i].cluster, .nodes), or drop kube.clusters to measure one existing cluster")
		}
	}
	if k.ExtraServices < 0 || k.ExtraServices > maxExtraServices {
		return s.kubeErrAt("extra_services", -1, "%d: give 0 to %d Services", k.ExtraServices, maxExtraServices)
	}
	for i, t := range k.ExtraTests {
		if _, err := engine.ParseTest(t); err != nil {
			return s.kubeErrAt("extra_tests", i, "%v", err)
		}
	}
	cross := len(k.Placements) == 0 || slices.Contains(k.Placements, measure.CrossNode)
	names, clusters := map[string]int{}, map[string]int{}
	for i := range k.Clusters {
		c := &k.Clusters[i]
		if c.Cluster == "" {
			c.Cluster = fmt.Sprintf("kt%d", i+1)
		}
		if c.CNI == "" {
			c.CNI = clusternet.CNIBridge
		}
		if c.Proxy == "" {
			c.Proxy = clusternet.DefaultProxy
		}
		if c.Nodes == 0 {
			c.Nodes = 2
		}
		if !configNameRE.MatchString(c.Name) {
			return s.clusterErrAt(i, "name", "%q: name the configuration with 1-40 of a-z, 0-9, '.', '+', '_', '-' (it names its cells: NAME/service@same-node/tcp_crr)", c.Name)
		}
		if j, dup := names[c.Name]; dup {
			return s.clusterErrAt(i, "name", "%q is also the name of kube.clusters[%d]: give each configuration its own name", c.Name, j)
		}
		names[c.Name] = i
		if err := lab.ValidName("cluster", c.Cluster); err != nil {
			return s.clusterErrAt(i, "cluster", "%v", err)
		}
		if j, dup := clusters[c.Cluster]; dup {
			return s.clusterErrAt(i, "cluster", "%q is also kube.clusters[%d]'s cluster: give each configuration its own cluster name", c.Cluster, j)
		}
		clusters[c.Cluster] = i
		if !slices.Contains(clusternet.CNIs, c.CNI) {
			return s.clusterErrAt(i, "cni", "unknown CNI %q (known: %s)", c.CNI, strings.Join(clusternet.CNIs, ", "))
		}
		if _, err := clusternet.GetProxy(c.Proxy); err != nil {
			return s.clusterErrAt(i, "proxy", "%v", err)
		}
		if c.Nodes < 1 {
			return s.clusterErrAt(i, "nodes", "%d is below the minimum 1", c.Nodes)
		}
		if cross && c.Nodes < 2 {
			return s.clusterErrAt(i, "nodes", "cross-node needs 2 nodes: set nodes: 2, or kube.placements: [same-node]")
		}
		if e := k.ExtraFor(*c); e < 0 || e > maxExtraServices {
			return s.clusterErrAt(i, "extra_services", "%d: give 0 to %d Services", e, maxExtraServices)
		}
		// What kube up itself refuses (a mode this machine lacks, a CNI
		// and proxy that do not work together), said before anything runs.
		if err := c.Spec().Validate(); err != nil {
			key := "name"
			var fe *field.Error
			if errors.As(err, &fe) {
				key = fe.Field
			}
			return s.clusterErrAt(i, key, "%v", field.Rendered(err, field.Key))
		}
	}
	return nil
}

// clusterErrAt formats an error at the line of kube.clusters[i].key (or of
// the item when the key is not written).
func (s *Scenario) clusterErrAt(i int, key, format string, args ...any) error {
	line := s.line("kube", -1)
	if n := s.kubeNode("clusters"); n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
		item := n.Content[i]
		line = item.Line
		for j := 0; item.Kind == yaml.MappingNode && j+1 < len(item.Content); j += 2 {
			if item.Content[j].Value == key {
				line = item.Content[j].Line
			}
		}
	}
	return fmt.Errorf("%s:%d: field kube.clusters[%d].%s: %s", s.file, line, i, key, fmt.Sprintf(format, args...))
}

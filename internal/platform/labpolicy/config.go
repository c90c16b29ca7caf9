package labpolicy

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// Config is a lab's policies and what the model needs of its pods, as
// policies.json keeps them.
type Config struct {
	Provider  string `json:"provider"`
	Installed bool   `json:"installed"`
	// Namespaces give namespaces labels.
	Namespaces []netpol.Namespace `json:"namespaces,omitempty"`
	// Pods give lab pods (by name) a namespace, labels and named ports;
	// their addresses are always the lab's.
	Pods     []netpol.Pod                 `json:"pods,omitempty"`
	Policies []networkingv1.NetworkPolicy `json:"policies,omitempty"`
	// LoadSeconds is how long the provider took to load the last change.
	LoadSeconds float64 `json:"load_seconds,omitempty"`
}

// FileName is the policies file inside a lab's state directory.
const FileName = "policies.json"

// PodLabel is the label every lab pod has unless its Pod document gives
// it labels: pod=NAME.
const PodLabel = "pod"

// Load reads a lab's policies (an empty config when it has none yet).
func Load(labName string) (*Config, error) { return lab.ReadNew[Config](labName, FileName) }

// Save writes a lab's policies atomically.
func (c *Config) Save(labName string) error { return lab.WriteFile(labName, FileName, c) }

// Clone is a deep copy (the "old" side of a change). Policies are copied
// by their generated DeepCopy: a JSON round trip cost a tenth of a change's
// CPU at 1,000 policies.
func (c *Config) Clone() *Config {
	n := *c
	n.Policies = make([]networkingv1.NetworkPolicy, len(c.Policies))
	for i := range c.Policies {
		c.Policies[i].DeepCopyInto(&n.Policies[i])
	}
	n.Namespaces = slices.Clone(c.Namespaces)
	for i := range n.Namespaces {
		n.Namespaces[i].Labels = maps.Clone(n.Namespaces[i].Labels)
	}
	n.Pods = slices.Clone(c.Pods)
	for i := range n.Pods {
		p := &n.Pods[i]
		p.Labels, p.IPs, p.Ports = maps.Clone(p.Labels), slices.Clone(p.IPs), slices.Clone(p.Ports)
	}
	return &n
}

// Merge adds a parsed file to the config: a policy, namespace or pod of the
// same name replaces the one there (a policy without a namespace is in the
// default one).
func (c *Config) Merge(d netpol.Doc) {
	c.Policies = merge(c.Policies, d.Policies, netpol.PolicyKey)
	c.Namespaces = merge(c.Namespaces, d.Namespaces, func(n *netpol.Namespace) string { return n.Name })
	c.Pods = merge(c.Pods, d.Pods, func(p *netpol.Pod) string { return p.Name })
}

// merge is have with each of add in the place of the element of the same
// key (the first), or appended when there is none.
func merge[T any, K comparable](have, add []T, key func(*T) K) []T {
	at := make(map[K]int, len(have)) // an element's index by its key
	for i := len(have) - 1; i >= 0; i-- {
		at[key(&have[i])] = i
	}
	for i := range add {
		k := key(&add[i])
		if j, ok := at[k]; ok {
			have[j] = add[i]
		} else {
			at[k] = len(have)
			have = append(have, add[i])
		}
	}
	return have
}

// World is the model of lab st with c's policies: every lab pod with its
// addresses, in the namespace and with the labels and named ports its Pod
// document gives (else namespace default, label pod=NAME).
func (c *Config) World(st *lab.State) (*netpol.World, error) {
	w := &netpol.World{Namespaces: c.Namespaces, Policies: c.Policies}
	var names []string
	for _, lp := range st.Pods {
		names = append(names, lp.Name)
		p := netpol.Pod{Name: lp.Name, Namespace: netpol.DefaultNamespace, Labels: netpol.Labels{PodLabel: lp.Name}}
		if i := slices.IndexFunc(c.Pods, func(q netpol.Pod) bool { return q.Name == lp.Name }); i >= 0 {
			d := c.Pods[i]
			p.Namespace, p.Labels, p.Ports = d.Namespace, d.Labels, d.Ports
		}
		for _, s := range []string{lp.IP, lp.IP6} {
			if s == "" {
				continue
			}
			a, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("lab %s: pod %s: address %q: %v", st.Name, lp.Name, s, err)
			}
			p.IPs = append(p.IPs, a)
		}
		w.Pods = append(w.Pods, p)
	}
	for _, p := range c.Pods {
		if !slices.Contains(names, p.Name) {
			return nil, fmt.Errorf("lab %s has no pod %q to give labels (its pods: %s): name a lab pod in the Pod document", st.Name, p.Name, strings.Join(names, ", "))
		}
	}
	return w, nil
}

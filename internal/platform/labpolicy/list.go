package labpolicy

import (
	"maps"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// Listing is what `policy ls` shows: the policies, and the pods as the
// policies see them.
type Listing struct {
	Lab       string       `json:"lab"`
	Provider  string       `json:"provider,omitempty"`
	Installed bool         `json:"installed"`
	Policies  []PolicyLine `json:"policies"`
	Pods      []PodLine    `json:"pods"`
}

// PolicyLine is one policy: its directions, the pods it selects and its
// rule counts.
type PolicyLine struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Types     []string `json:"types"`
	Selects   []string `json:"selects"`
	Ingress   int      `json:"ingress_rules"`
	Egress    int      `json:"egress_rules"`
}

// PodLine is one lab pod in the model: namespace, labels, isolation.
type PodLine struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace"`
	Labels          string `json:"labels"`
	IsolatedIngress bool   `json:"isolated_ingress"`
	IsolatedEgress  bool   `json:"isolated_egress"`
	Addresses       string `json:"addresses"`
}

// List describes lab st's policies c.
func List(st *lab.State, c *Config) (Listing, error) {
	w, err := c.World(st)
	if err != nil {
		return Listing{}, err
	}
	out := Listing{Lab: st.Name, Provider: c.Provider, Installed: c.Installed, Policies: []PolicyLine{}}
	for i := range w.Policies {
		p := &w.Policies[i]
		in, eg := netpol.Types(p)
		l := PolicyLine{Namespace: p.Namespace, Name: p.Name, Ingress: len(p.Spec.Ingress), Egress: len(p.Spec.Egress), Selects: []string{}}
		if in {
			l.Types = append(l.Types, "Ingress")
		}
		if eg {
			l.Types = append(l.Types, "Egress")
		}
		for j := range w.Pods {
			if netpol.Selects(p, &w.Pods[j]) {
				l.Selects = append(l.Selects, w.Pods[j].Name)
			}
		}
		out.Policies = append(out.Policies, l)
	}
	for i := range w.Pods {
		p := &w.Pods[i]
		var labels, addrs []string
		for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
			labels = append(labels, k+"="+p.Labels[k])
		}
		for _, a := range p.IPs {
			addrs = append(addrs, a.String())
		}
		out.Pods = append(out.Pods, PodLine{Name: p.Name, Namespace: p.Namespace, Labels: strings.Join(labels, ","), Addresses: strings.Join(addrs, ","),
			IsolatedIngress: w.IsolatedFor(p, false), IsolatedEgress: w.IsolatedFor(p, true)})
	}
	return out, nil
}

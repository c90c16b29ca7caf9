package netpoltest

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// String is the world as a person reads it: its seed and family, the
// namespaces' and pods' labels, addresses and named ports, and each policy
// as YAML.
func (g *Gen) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "world of seed %d (family %s)\n", g.Seed, g.Family.Or())
	for _, ns := range g.World.Namespaces {
		fmt.Fprintf(&b, "namespace %s %s\n", ns.Name, labelString(ns.Labels))
	}
	for _, p := range g.World.Pods {
		fmt.Fprintf(&b, "pod %s/%s %s %v", p.Namespace, p.Name, labelString(p.Labels), p.IPs)
		for _, np := range p.Ports {
			fmt.Fprintf(&b, " %s=%s/%d", np.Name, np.Proto, np.Port)
		}
		b.WriteString("\n")
	}
	for _, p := range g.World.Policies {
		p.Kind, p.APIVersion = netpol.KindNetworkPolicy, networkingv1.SchemeGroupVersion.String()
		y, err := yaml.Marshal(p)
		if err != nil {
			y = []byte(err.Error())
		}
		fmt.Fprintf(&b, "---\n%s", y)
	}
	return b.String()
}

func labelString(l map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		kv = append(kv, k+"="+l[k])
	}
	return "{" + strings.Join(kv, ",") + "}"
}

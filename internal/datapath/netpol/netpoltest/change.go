package netpoltest

import (
	"fmt"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// Change is one change to a world, as a cluster's informers see them: a
// policy set (added or updated) or deleted, a pod set (added, or its
// labels, addresses or named ports updated) or deleted, a namespace's
// labels set or the namespace deleted.
type Change struct {
	Kind ChangeKind
	// Policy is the policy set; Pod the pod set; Namespace the namespace
	// set.
	Policy    *networkingv1.NetworkPolicy
	Pod       *netpol.Pod
	Namespace *netpol.Namespace
	// Of a deletion: the object's namespace (a namespace's: its name) and
	// name.
	NS, Name string
}

// ChangeKind says what a Change does.
type ChangeKind string

// The kinds of change.
const (
	SetPolicy       ChangeKind = "set policy"
	DeletePolicy    ChangeKind = "delete policy"
	SetPod          ChangeKind = "set pod"
	DeletePod       ChangeKind = "delete pod"
	SetNamespace    ChangeKind = "set namespace"
	DeleteNamespace ChangeKind = "delete namespace"
)

func (c Change) String() string {
	switch {
	case c.Policy != nil:
		p := *c.Policy
		p.Kind, p.APIVersion = netpol.KindNetworkPolicy, networkingv1.SchemeGroupVersion.String()
		y, err := yaml.Marshal(p)
		if err != nil {
			y = []byte(err.Error())
		}
		return fmt.Sprintf("%s %s/%s:\n%s", c.Kind, p.Namespace, p.Name, y)
	case c.Pod != nil:
		return fmt.Sprintf("%s %s/%s %s %v %v", c.Kind, c.Pod.Namespace, c.Pod.Name, labelString(c.Pod.Labels), c.Pod.IPs, c.Pod.Ports)
	case c.Namespace != nil:
		return fmt.Sprintf("%s %s %s", c.Kind, c.Namespace.Name, labelString(c.Namespace.Labels))
	case c.Kind == DeleteNamespace:
		return fmt.Sprintf("%s %s", c.Kind, c.Name)
	}
	return fmt.Sprintf("%s %s/%s", c.Kind, c.NS, c.Name)
}

// ApplyTo makes the change in compiler c.
func (c Change) ApplyTo(comp *netpol.Compiler) {
	switch c.Kind {
	case SetPolicy:
		comp.SetPolicy(c.Policy)
	case DeletePolicy:
		comp.DeletePolicy(c.NS, c.Name)
	case SetPod:
		comp.SetPod(*c.Pod)
	case DeletePod:
		comp.DeletePod(c.NS, c.Name)
	case SetNamespace:
		comp.SetNamespace(*c.Namespace)
	case DeleteNamespace:
		comp.DeleteNamespace(c.Name)
	default:
		panic("unknown change " + string(c.Kind))
	}
}

// Change draws a change from the world's seed, applies it to the world and
// returns it. The world may then fail netpol.Check where a cluster's may
// too (a policy's named port that no pod has any more), never with two
// pods on one address.
func (g *Gen) Change() Change {
	w := g.World
	for {
		switch g.rng.IntN(10) {
		case 0, 1: // a policy added
			p := g.policy(g.next())
			w.Policies = append(w.Policies, p)
			return Change{Kind: SetPolicy, Policy: &p}
		case 2: // a policy updated: drawn again, its namespace and name kept
			if len(w.Policies) == 0 {
				continue
			}
			i := g.rng.IntN(len(w.Policies))
			p := g.policy(0)
			p.Namespace, p.Name = w.Policies[i].Namespace, w.Policies[i].Name
			w.Policies[i] = p
			return Change{Kind: SetPolicy, Policy: &p}
		case 3: // a policy deleted
			if len(w.Policies) == 0 {
				continue
			}
			i := g.rng.IntN(len(w.Policies))
			ch := Change{Kind: DeletePolicy, NS: w.Policies[i].Namespace, Name: w.Policies[i].Name}
			w.Policies = slices.Delete(w.Policies, i, i+1)
			return ch
		case 4: // a pod added
			if len(w.Pods) >= 40 {
				continue
			}
			p := g.pod(g.next())
			w.Pods = append(w.Pods, p)
			return Change{Kind: SetPod, Pod: &p}
		case 5, 6: // a pod updated: its labels, now and then its named ports or addresses
			if len(w.Pods) == 0 {
				continue
			}
			i := g.rng.IntN(len(w.Pods))
			p := &w.Pods[i]
			p.Labels = g.labels(podKeys)
			if g.rng.IntN(3) == 0 {
				fresh := g.pod(g.next())
				if g.rng.IntN(2) == 0 {
					p.Ports = fresh.Ports
				} else {
					p.IPs = fresh.IPs
				}
			}
			q := *p
			return Change{Kind: SetPod, Pod: &q}
		case 7: // a pod deleted
			if len(w.Pods) < 2 {
				continue
			}
			i := g.rng.IntN(len(w.Pods))
			ch := Change{Kind: DeletePod, NS: w.Pods[i].Namespace, Name: w.Pods[i].Name}
			w.Pods = slices.Delete(w.Pods, i, i+1)
			return ch
		case 8: // a namespace's labels set (listed from now on)
			name := g.pick(nsNames)
			ns := netpol.Namespace{Name: name, Labels: g.labels([]string{"team"})}
			if i := slices.IndexFunc(w.Namespaces, func(n netpol.Namespace) bool { return n.Name == name }); i >= 0 {
				w.Namespaces[i] = ns
			} else {
				w.Namespaces = append(w.Namespaces, ns)
			}
			return Change{Kind: SetNamespace, Namespace: &ns}
		default: // a namespace deleted (its labels forgotten; one stays listed for new policies)
			if len(w.Namespaces) < 2 {
				continue
			}
			i := g.rng.IntN(len(w.Namespaces))
			ch := Change{Kind: DeleteNamespace, Name: w.Namespaces[i].Name}
			w.Namespaces = slices.Delete(w.Namespaces, i, i+1)
			return ch
		}
	}
}

// next is a number no pod or policy of the world has had: a new pod's
// name and address, a new policy's name.
func (g *Gen) next() int {
	g.made++
	return g.made
}

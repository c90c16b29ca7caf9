package netpolicy

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol/netpoltest"
)

// TestSyncMatchesCompile: the controller's rules, kept by its compiler
// across syncs, are the whole cluster compiled again (CompileWhere of the
// model of every object it was given, the node's pods kept), Allow lists
// compared as sets: random worlds (netpoltest) given to the informers'
// handlers, then random changes, one to three between two syncs, with the
// node's own pods' rules (nftables) and every pod's (eBPF).
func TestSyncMatchesCompile(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		everywhere := seed%2 == 0
		g := netpoltest.New(seed)
		b := &fakeBackend{everywhere: everywhere}
		c := NewController(here, b, nil, nil, nil)
		objects := map[string]any{}
		give := func(key string, obj any) {
			h := handlerOf(c, key)
			if obj == nil {
				del(h, objects[key])
				delete(objects, key)
				return
			}
			objects[key] = obj
			add(h, obj)
		}
		for _, ns := range g.World.Namespaces {
			give("ns/"+ns.Name, namespaceObject(ns))
		}
		for _, p := range g.World.Pods {
			give("pod/"+p.Namespace+"/"+p.Name, podObject(p))
		}
		for i := range g.World.Policies {
			p := g.World.Policies[i]
			give("policy/"+p.Namespace+"/"+p.Name, &p)
		}
		for step := 0; step < 30; step++ {
			if step > 0 {
				for range 1 + step%3 {
					ch := g.Change()
					switch ch.Kind {
					case netpoltest.SetPolicy:
						give("policy/"+ch.Policy.Namespace+"/"+ch.Policy.Name, ch.Policy)
					case netpoltest.DeletePolicy:
						give("policy/"+ch.NS+"/"+ch.Name, nil)
					case netpoltest.SetPod:
						give("pod/"+ch.Pod.Namespace+"/"+ch.Pod.Name, podObject(*ch.Pod))
					case netpoltest.DeletePod:
						give("pod/"+ch.NS+"/"+ch.Name, nil)
					case netpoltest.SetNamespace:
						give("ns/"+ch.Namespace.Name, namespaceObject(*ch.Namespace))
					case netpoltest.DeleteNamespace:
						give("ns/"+ch.Name, nil)
					}
				}
			}
			syncOnce(t, c)
			if got, want := sortedAllows(*b.last()), sortedAllows(referenceRules(objects, everywhere)); !reflect.DeepEqual(got, want) {
				t.Fatalf("sequence %d step %d (eBPF %v): the controller's rules\n%+v\ndiffer from the cluster compiled again\n%+v\nthe world:\n%s",
					seed, step, everywhere, got, want, g)
			}
		}
	}
}

func handlerOf(c *Controller, key string) interface {
	OnAdd(any, bool)
	OnUpdate(any, any)
	OnDelete(any)
} {
	switch {
	case strings.HasPrefix(key, "ns/"):
		return c.NamespaceHandler()
	case strings.HasPrefix(key, "pod/"):
		return c.PodHandler()
	}
	return c.PolicyHandler()
}

// podObject is model pod p as the API gives it, on this node or another
// (by its name).
func podObject(p netpol.Pod) *corev1.Pod {
	node := here
	if len(p.Name)%2 == 1 {
		node = "n2"
	}
	o := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, Labels: maps.Clone(p.Labels)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c"}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, a := range p.IPs {
		o.Status.PodIPs = append(o.Status.PodIPs, corev1.PodIP{IP: a.String()})
	}
	for _, np := range p.Ports {
		o.Spec.Containers[0].Ports = append(o.Spec.Containers[0].Ports, corev1.ContainerPort{Name: np.Name, ContainerPort: int32(np.Port), Protocol: corev1.Protocol(np.Proto)})
	}
	return o
}

func namespaceObject(ns netpol.Namespace) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: maps.Clone(ns.Labels)}}
}

// referenceRules compiles the objects given whole, as the controller did
// before it kept a compiler.
func referenceRules(objects map[string]any, everywhere bool) netpol.Rules {
	pods := map[string]*corev1.Pod{}
	w := &netpol.World{}
	for _, k := range slices.Sorted(maps.Keys(objects)) {
		switch o := objects[k].(type) {
		case *corev1.Namespace:
			w.Namespaces = append(w.Namespaces, netpol.Namespace{Name: o.Name, Labels: netpol.Labels(o.Labels)})
		case *corev1.Pod:
			pods[o.Namespace+"/"+o.Name] = o
		case *networkingv1.NetworkPolicy:
			w.Policies = append(w.Policies, *o)
		}
	}
	var local map[string]bool
	w.Pods, local = modelPods(pods, here)
	keep := func(p *netpol.Pod) bool { return local[p.Namespace+"/"+p.Name] }
	if everywhere {
		keep = nil
	}
	return netpol.CompileWhere(w, keep)
}

// sortedAllows is r with each side's Allows in one order (a pod's egress
// named ports follow the world's order of pods).
func sortedAllows(r netpol.Rules) netpol.Rules {
	out := netpol.Rules{Pods: slices.Clone(r.Pods)}
	if len(out.Pods) == 0 {
		out.Pods = nil
	}
	for i := range out.Pods {
		for _, s := range []*netpol.Side{&out.Pods[i].Ingress, &out.Pods[i].Egress} {
			s.Allow = slices.Clone(s.Allow)
			slices.SortStableFunc(s.Allow, func(a, b *netpol.Allow) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		}
	}
	return out
}

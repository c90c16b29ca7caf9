// Package netpolicy is vnetlab's NetworkPolicy controller for one node of a
// cluster (`vnetlab kube-netpol`, started by kube up --network-policy
// vnetlab on every node), shaped like the Service proxy
// (internal/kube/proxy): client-go informers on NetworkPolicies, Pods and
// Namespaces whose handlers only record changes (resync.Changes), and one Sync
// that feeds what they recorded to the cluster's netpol.Compiler (the
// model's pods: world.go), which compiles again only the pods a change
// touches, and hands the rules of the node's own pods to the node's
// Backend (nftables: the table of internal/datapath/polnft). A policy port the node cannot enforce (SCTP on
// a kernel without it) is taken out of the policy (netpol.WithoutProto: the
// rule allows nothing by it, the policy still isolates) and gets a Warning
// Event naming the field, never silently allowed.
package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/kube/resync"
)

// Controller is one node's policy controller.
type Controller struct {
	node    string
	backend Backend
	// unsupported are the protocols the node cannot enforce (its kernel
	// lacks them), each with why.
	unsupported map[netpol.Proto]string
	warn        func(p *networkingv1.NetworkPolicy, reason, msg string)
	logf        func(string, ...any)

	policies   resync.Changes[networkingv1.NetworkPolicy]
	pods       resync.Changes[corev1.Pod]
	namespaces resync.Changes[corev1.Namespace]
	kick       resync.Kick

	// What the syncs applied.
	havePolicies   map[string]*networkingv1.NetworkPolicy
	havePods       map[string]*corev1.Pod
	haveNamespaces map[string]*corev1.Namespace
	warned         map[string]bool // policy uid/generation/field already warned about
	// enforced is each policy as the node enforces it, by key, kept while
	// the policy's object is the one it was made from.
	enforced map[string]enforcedPolicy
	// comp is the cluster compiled, fed the changes at each Sync; local
	// are the node's own pods and model the pods comp holds, by
	// namespace/name.
	comp         *netpol.Compiler
	local, model map[string]bool
	failed       bool // the last Apply failed: sync again
	// Syncs counts the syncs that applied rules; Applied is when the last did.
	Syncs   int
	Applied time.Time
}

// NewController is a controller of node's pods writing through backend.
// unsupported maps each protocol the node cannot enforce to why; warn posts
// a Warning Event on a policy (nil: logged only).
func NewController(node string, backend Backend, unsupported map[netpol.Proto]string, warn func(p *networkingv1.NetworkPolicy, reason, msg string), logf func(string, ...any)) *Controller {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Controller{node: node, backend: backend, unsupported: unsupported, warn: warn, logf: logf, kick: resync.NewKick(),
		havePolicies: map[string]*networkingv1.NetworkPolicy{}, havePods: map[string]*corev1.Pod{},
		haveNamespaces: map[string]*corev1.Namespace{}, warned: map[string]bool{}, enforced: map[string]enforcedPolicy{}}
}

// enforcedPolicy is a policy as the node enforces it (p), made from the
// object from.
type enforcedPolicy struct {
	from, p *networkingv1.NetworkPolicy
}

// PolicyHandler, PodHandler and NamespaceHandler are the informers' event
// handlers: they record the change and wake Loop.
func (c *Controller) PolicyHandler() cache.ResourceEventHandler { return c.handler(c.policies.Record) }
func (c *Controller) PodHandler() cache.ResourceEventHandler    { return c.handler(c.pods.Record) }
func (c *Controller) NamespaceHandler() cache.ResourceEventHandler {
	return c.handler(c.namespaces.Record)
}

func (c *Controller) handler(record func(obj any, gone bool) bool) cache.ResourceEventHandlerFuncs {
	note := func(obj any, gone bool) {
		if record(obj, gone) {
			c.kick.Now()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { note(o, false) },
		UpdateFunc: func(_, o any) { note(o, false) },
		DeleteFunc: func(o any) { note(o, true) },
	}
}

// Sync applies the changes recorded since the last Sync: each is given to
// the cluster's compiler, which compiles again the rules of the pods it
// touches (the rules of one pod depend on every pod its policies'
// selectors match), and the node's rules are handed to the backend, which
// changes the data path only where the result differs.
func (c *Controller) Sync() (Stats, error) {
	t0 := time.Now()
	policies, pods, namespaces := c.policies.Take(), c.pods.Take(), c.namespaces.Take()
	changed := apply(c.havePolicies, policies)
	changed = apply(c.havePods, pods) || changed
	changed = apply(c.haveNamespaces, namespaces) || changed
	if !changed && !c.failed && c.Syncs > 0 {
		return Stats{}, nil
	}
	if c.comp == nil {
		c.comp = netpol.NewCompiler(func(p *netpol.Pod) bool {
			return c.backend.Everywhere() || c.local[p.Namespace+"/"+p.Name]
		})
		c.model = map[string]bool{}
		policies, namespaces = mapOf(c.havePolicies), mapOf(c.haveNamespaces)
		pods = map[string]*corev1.Pod{"": nil} // every pod
	}
	c.comp.Batch(func() {
		for k := range namespaces {
			if ns := c.haveNamespaces[k]; ns != nil {
				c.comp.SetNamespace(netpol.Namespace{Name: ns.Name, Labels: netpol.Labels(ns.Labels)})
			} else {
				c.comp.DeleteNamespace(k)
			}
		}
		for k := range policies {
			if p := c.havePolicies[k]; p != nil {
				c.comp.SetPolicy(c.enforcedOf(k, p))
			} else {
				ns, name, _ := strings.Cut(k, "/")
				c.comp.DeletePolicy(ns, name)
				delete(c.enforced, k)
			}
		}
		if len(pods) > 0 {
			c.setPods()
		}
	})
	r := c.comp.Rules()
	changes := c.comp.Changes()
	npods, npolicies := c.comp.Len()
	st := Stats{Pods: npods, Local: len(c.local), Policies: npolicies}
	for _, p := range r.Pods {
		if c.local[p.Namespace+"/"+p.Pod] && (p.Ingress.Isolated || p.Egress.Isolated) {
			st.Isolated++
		}
	}
	st.Compile = time.Since(t0)
	attach := map[string]bool{}
	for k := range c.local {
		if p := c.havePods[k]; p != nil && p.DeletionTimestamp == nil {
			attach[k] = true
		}
	}
	err := c.backend.Apply(&r, changes, attach)
	c.failed = err != nil
	st.Took = time.Since(t0)
	if err != nil {
		return st, fmt.Errorf("%s: %w", c.backend.Name(), err)
	}
	c.Syncs++
	c.Applied = time.Now()
	return st, nil
}

// setPods gives the compiler the model's pods of the cluster as they are
// now (which pod has an address depends on the others: modelPods), each
// set (an unchanged one costs a comparison) and those gone deleted.
func (c *Controller) setPods() {
	pods, local := modelPods(c.havePods, c.node)
	c.local = local
	now := make(map[string]bool, len(pods))
	for _, p := range pods {
		c.comp.SetPod(p)
		now[p.Namespace+"/"+p.Name] = true
	}
	for k := range c.model {
		if !now[k] {
			ns, name, _ := strings.Cut(k, "/")
			c.comp.DeletePod(ns, name)
		}
	}
	c.model = now
}

// mapOf is every key of m, as a change tracker's records.
func mapOf[T any](m map[string]*T) map[string]*T {
	out := make(map[string]*T, len(m))
	for k := range m {
		out[k] = nil
	}
	return out
}

// Stats says what a sync compiled and how long it took.
type Stats struct {
	Pods, Local, Isolated, Policies int
	Compile, Took                   time.Duration
}

// enforcedOf is policy p (key k) as the node enforces it: with the ports
// of the protocols the node cannot enforce taken out, and a Warning Event
// once per policy generation and field. It is made again only when the
// policy's object changed.
func (c *Controller) enforcedOf(k string, p *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	if e, ok := c.enforced[k]; ok && e.from == p {
		return e.p
	}
	q := c.enforce(k, p)
	c.enforced[k] = enforcedPolicy{from: p, p: q}
	return q
}

// enforce is policy p (key k) as the node enforces it.
func (c *Controller) enforce(k string, p *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	for _, proto := range slices.Sorted(maps.Keys(c.unsupported)) {
		q, fields := netpol.WithoutProto(p, proto)
		if len(fields) == 0 {
			continue
		}
		key := fmt.Sprintf("%s/%d/%s", p.UID, p.Generation, strings.Join(fields, ","))
		if !c.warned[key] {
			c.warned[key] = true
			msg := fmt.Sprintf("%s: protocol %s cannot be enforced on node %s (%s): these ports allow nothing; the policy still isolates the pods it selects",
				strings.Join(fields, ", "), proto, c.node, c.unsupported[proto])
			c.logf("policy %s: %s", k, msg)
			if c.warn != nil {
				c.warn(p, "UnsupportedProtocol", msg)
			}
		}
		p = q
	}
	return p
}

// Loop syncs whenever a change is recorded, until ctx ends; a failed sync
// is retried after a backoff (resync.MinRetry doubling to MaxRetry), sooner
// if another change comes.
func (c *Controller) Loop(ctx context.Context) {
	c.kick.Loop(ctx, false, func() error {
		st, err := c.Sync()
		if err == nil && st.Took > 0 {
			c.logf("synced: %d policies, %d pods (%d here, %d isolated) in %s (compile %s)", st.Policies, st.Pods, st.Local, st.Isolated,
				st.Took.Round(time.Microsecond), st.Compile.Round(time.Microsecond))
		}
		return err
	}, func(err error, in time.Duration) { c.logf("sync: %v (retrying in %s)", err, in) })
}

// errNotSynced: the informers never listed everything.
var errNotSynced = errors.New("the informers never synced")

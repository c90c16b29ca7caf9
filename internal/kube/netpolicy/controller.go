// Package netpolicy is vnetlab's NetworkPolicy controller for one node of a
// cluster (`vnetlab kube-netpol`, started by kube up --network-policy
// vnetlab on every node), shaped like the Service proxy
// (internal/kube/proxy): client-go informers on NetworkPolicies, Pods and
// Namespaces whose handlers only record changes (changes.go), and one Sync
// that builds the cluster's netpol.World from what they recorded
// (world.go), compiles it (netpol.Compile), keeps the rules of the node's
// own pods and hands them to the node's Backend (nftables: the table of
// internal/datapath/polnft). A policy port the node cannot enforce (SCTP on
// a kernel without it) is taken out of the policy (netpol.WithoutProto: the
// rule allows nothing by it, the policy still isolates) and gets a Warning
// Event naming the field, never silently allowed.
package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
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

	policies   changes[networkingv1.NetworkPolicy]
	pods       changes[corev1.Pod]
	namespaces changes[corev1.Namespace]
	kick       chan struct{}

	// What the syncs applied.
	havePolicies   map[string]*networkingv1.NetworkPolicy
	havePods       map[string]*corev1.Pod
	haveNamespaces map[string]*corev1.Namespace
	warned         map[string]bool // policy uid/generation/field already warned about
	// enforced is enforceable's form of each policy, by key, kept while
	// the policy's object is the one it was made from.
	enforced map[string]enforcedPolicy
	failed   bool // the last Apply failed: sync again
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
	return &Controller{node: node, backend: backend, unsupported: unsupported, warn: warn, logf: logf, kick: make(chan struct{}, 1),
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
func (c *Controller) PolicyHandler() cache.ResourceEventHandler { return c.handler(c.policies.record) }
func (c *Controller) PodHandler() cache.ResourceEventHandler    { return c.handler(c.pods.record) }
func (c *Controller) NamespaceHandler() cache.ResourceEventHandler {
	return c.handler(c.namespaces.record)
}

func (c *Controller) handler(record func(obj any, gone bool) bool) cache.ResourceEventHandlerFuncs {
	note := func(obj any, gone bool) {
		if record(obj, gone) {
			c.kickNow()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { note(o, false) },
		UpdateFunc: func(_, o any) { note(o, false) },
		DeleteFunc: func(o any) { note(o, true) },
	}
}

// Sync applies the changes recorded since the last Sync: the whole cluster
// is compiled again (the rules of one pod depend on every pod its policies'
// selectors match) and the node's rules handed to the backend, which
// changes the data path only where the result differs.
func (c *Controller) Sync() (Stats, error) {
	t0 := time.Now()
	changed := apply(c.havePolicies, c.policies.take())
	changed = apply(c.havePods, c.pods.take()) || changed
	changed = apply(c.haveNamespaces, c.namespaces.take()) || changed
	if !changed && !c.failed && c.Syncs > 0 {
		return Stats{}, nil
	}
	w, local := buildWorld(c.haveNamespaces, c.havePods, c.enforceable(), c.node)
	keep := func(p *netpol.Pod) bool { return local[p.Namespace+"/"+p.Name] }
	if c.backend.Everywhere() {
		keep = nil
	}
	r := netpol.CompileWhere(w, keep)
	st := Stats{Pods: len(w.Pods), Local: len(local), Policies: len(w.Policies)}
	for _, p := range r.Pods {
		if local[p.Namespace+"/"+p.Pod] && (p.Ingress.Isolated || p.Egress.Isolated) {
			st.Isolated++
		}
	}
	st.Compile = time.Since(t0)
	attach := map[string]bool{}
	for k := range local {
		if p := c.havePods[k]; p != nil && p.DeletionTimestamp == nil {
			attach[k] = true
		}
	}
	err := c.backend.Apply(&r, attach)
	c.failed = err != nil
	st.Took = time.Since(t0)
	if err != nil {
		return st, fmt.Errorf("%s: %w", c.backend.Name(), err)
	}
	c.Syncs++
	c.Applied = time.Now()
	return st, nil
}

// Stats says what a sync compiled and how long it took.
type Stats struct {
	Pods, Local, Isolated, Policies int
	Compile, Took                   time.Duration
}

// enforceable is the policies, sorted by namespace and name, each with the
// ports of the protocols the node cannot enforce taken out, and a Warning
// Event once per policy generation and field. Each policy is made again
// only when its object changed: with many policies, making them all at
// every sync was most of a sync's time.
func (c *Controller) enforceable() []networkingv1.NetworkPolicy {
	out := make([]networkingv1.NetworkPolicy, 0, len(c.havePolicies))
	for _, k := range slices.Sorted(maps.Keys(c.havePolicies)) {
		p := c.havePolicies[k]
		if e, ok := c.enforced[k]; !ok || e.from != p {
			c.enforced[k] = enforcedPolicy{from: p, p: c.enforce(k, p)}
		}
		out = append(out, *c.enforced[k].p)
	}
	for k := range c.enforced {
		if c.havePolicies[k] == nil {
			delete(c.enforced, k)
		}
	}
	return out
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

// kickNow wakes Loop for a sync.
func (c *Controller) kickNow() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Loop syncs whenever a change is recorded, until ctx ends; a failed sync
// is retried after a backoff (100 ms doubling to 30 s), sooner if another
// change comes.
func (c *Controller) Loop(ctx context.Context) {
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 30 * time.Second}
	next := backoff
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-retry:
		}
		st, err := c.Sync()
		if err != nil {
			d := next.Step()
			retry = time.After(d)
			c.logf("sync: %v (retrying in %s)", err, d)
			continue
		}
		next, retry = backoff, nil
		if st.Took > 0 {
			c.logf("synced: %d policies, %d pods (%d here, %d isolated) in %s (compile %s)", st.Policies, st.Pods, st.Local, st.Isolated,
				st.Took.Round(time.Microsecond), st.Compile.Round(time.Microsecond))
		}
	}
}

// errNotSynced: the informers never listed everything.
var errNotSynced = errors.New("the informers never synced")

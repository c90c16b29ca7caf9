package netpol

import (
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// The incremental compiler: the world and its compiled rules kept between
// changes, so that a change costs what it touches rather than the whole
// world (Compile's). Its rules always equal Compile's of its World()
// (compiler_test.go holds it to that on random worlds and random changes).
//
// What a change recomputes:
//   - a policy added, updated or deleted: the rules of the pods its pod
//     selector selects, before and after;
//   - a pod added, updated (labels, addresses, named ports) or deleted: its
//     own rules, and those of the pods selected by every policy with a peer
//     that matches the pod (before or after) or an egress port named as
//     one of the pod's; those policies' rules are resolved again;
//   - a namespace's labels: the rules of the pods selected by every policy
//     with a namespaceSelector peer that matches them (before or after),
//     when the namespace holds pods.
//
// Indexes (selIndex) find those policies without trying every one: the
// policies by their pod selector, per namespace; their peers' pod
// selectors (per namespace for a podSelector alone, across namespaces
// with a namespaceSelector); their peers' namespace selectors; their
// egress ports by name. Each pod keeps the policies that select it, in
// order, and each policy its rules resolved (ruleForm), so a pod's rules
// are put together from them without compiling any policy again.

// PodKey names a pod of the model.
type PodKey struct{ Namespace, Name string }

func (k PodKey) String() string { return k.Namespace + "/" + k.Name }

// PolicyKey is a policy's key: NAMESPACE/NAME, the order a Compiler's
// rules take the policies in (as the cluster's informers key them).
func PolicyKey(p *networkingv1.NetworkPolicy) string { return policyNamespace(p) + "/" + p.Name }

// Compiler is the compiled state of a world that changes one object at a
// time. Its zero value is not ready: NewCompiler.
type Compiler struct {
	keep func(*Pod) bool
	// w holds the namespaces (sorted by name) and the pods (sorted by
	// namespace and name), with a memo kept across changes.
	w        World
	pods     map[PodKey]*podState
	policies map[string]*policyState
	// The indexes: policies by their pod selector, per namespace; by
	// their peers' pod selectors (alone: per the policy's namespace; with
	// a namespace selector: anyNS); by their peers' namespace selectors;
	// by their egress ports' names.
	selectors map[string]selIndex
	podPeers  map[string]selIndex
	anyNS     selIndex
	nsPeers   selIndex
	named     map[string]map[string]int
	// The same pod selectors by the label keys they read, for a pod whose
	// labels alone change: the policies' own, per namespace; their peers'
	// (alone: per the policy's namespace; with a namespace selector:
	// anyNSKeys).
	selKeys   map[string]keyIndex
	peerKeys  map[string]keyIndex
	anyNSKeys keyIndex
	// rules are the kept pods' rules; changed the pods whose rules changed
	// since Changed last took them.
	rules   map[PodKey]*PodRules
	changed map[PodKey]bool
	// was are the changed pods' rules when Changed or Changes last took
	// them, with the Allows that came and went since (changes.go).
	was   map[PodKey]podWas
	dirty map[PodKey]bool
	// stale are the policies whose rules are resolved again before the
	// pods' rules are put together.
	stale map[string]bool
	// batch: the pods' rules wait for the end of Batch.
	batch bool
	// gen numbers the policies' resolutions.
	gen uint64
}

type podState struct {
	kept bool
	// by are the policies selecting the pod, sorted by key.
	by []*policyState
	// segs are the Allows each policy gave the pod when its rules were
	// last put together (segments.go), sorted by key; spare is the buffer
	// the next are put in. whole: the pod itself changed since, so each
	// segment is made again.
	segs, spare []segment
	whole       bool
}

type policyState struct {
	key    string
	p      *networkingv1.NetworkPolicy
	ns     string
	in, eg bool
	// ingress and egress are the policy's rules resolved.
	ingress, egress []ruleForm
	// selected are the pods its pod selector selects.
	selected map[PodKey]bool
	// gen changes each time its rules are resolved: a pod's segment of
	// another gen is made again.
	gen uint64
}

// NewCompiler is an empty world's compiler keeping the rules of the pods
// keep keeps (nil: every pod), as CompileWhere: the peers of their rules
// are still every pod. keep is asked when a pod is set.
func NewCompiler(keep func(*Pod) bool) *Compiler {
	c := &Compiler{keep: keep, pods: map[PodKey]*podState{}, policies: map[string]*policyState{},
		selectors: map[string]selIndex{}, podPeers: map[string]selIndex{}, anyNS: selIndex{}, nsPeers: selIndex{},
		named: map[string]map[string]int{}, selKeys: map[string]keyIndex{}, peerKeys: map[string]keyIndex{}, anyNSKeys: keyIndex{}, rules: map[PodKey]*PodRules{}, changed: map[PodKey]bool{}, was: map[PodKey]podWas{}, dirty: map[PodKey]bool{}, stale: map[string]bool{}}
	c.w.memo = &memo{selectors: map[*metav1.LabelSelector]labels.Selector{}, namespace: map[string]labels.Set{}}
	return c
}

// NewCompilerOf is a compiler of world w (CompileWhere's keep), as if
// each of its objects had been set in turn.
func NewCompilerOf(w *World, keep func(*Pod) bool) *Compiler {
	c := NewCompiler(keep)
	c.Batch(func() {
		for _, ns := range w.Namespaces {
			c.SetNamespace(ns)
		}
		for _, p := range w.Pods {
			c.SetPod(p)
		}
		for i := range w.Policies {
			c.SetPolicy(&w.Policies[i])
		}
	})
	c.Changed()
	return c
}

// Batch runs changes, which set and delete the compiler's objects, and
// puts the pods' rules together once, at the end: many changes at once (a
// first load, a sync of what came meanwhile) cost each pod's rules once.
func (c *Compiler) Batch(changes func()) {
	c.batch = true
	defer func() {
		c.batch = false
		c.recompute()
	}()
	changes()
}

// World is a copy of the compiler's world: its namespaces and pods sorted
// as kept, its policies in key order (Compile of it gives Rules()).
func (c *Compiler) World() *World {
	w := &World{Namespaces: slices.Clone(c.w.Namespaces), Pods: slices.Clone(c.w.Pods)}
	for _, k := range slices.Sorted(maps.Keys(c.policies)) {
		w.Policies = append(w.Policies, *c.policies[k].p)
	}
	return w
}

// Policy is the policy of key (PolicyKey's), nil when there is none (read
// it, never write it).
func (c *Compiler) Policy(key string) *networkingv1.NetworkPolicy {
	if ps := c.policies[key]; ps != nil {
		return ps.p
	}
	return nil
}

// Len says how many pods and policies the world holds.
func (c *Compiler) Len() (pods, policies int) { return len(c.w.Pods), len(c.policies) }

// Rules are the kept pods' rules, sorted by namespace and name, as
// Compile's. They share memory with the compiler's state: read them,
// never write them.
func (c *Compiler) Rules() Rules {
	out := Rules{Pods: make([]PodRules, 0, len(c.rules))}
	for i := range c.w.Pods {
		if r := c.rules[PodKey{c.w.Pods[i].Namespace, c.w.Pods[i].Name}]; r != nil {
			out.Pods = append(out.Pods, *r)
		}
	}
	return out
}

// PodRules are pod k's rules, nil when k is no kept pod (read them, never
// write them).
func (c *Compiler) PodRules(k PodKey) *PodRules { return c.rules[k] }

// Changed takes the pods whose rules were added, changed or removed since
// the last call, sorted.
func (c *Compiler) Changed() []PodKey {
	out := c.changedKeys()
	clear(c.changed)
	clear(c.was)
	return out
}

// changedKeys are the pods changed since Changed or Changes last took
// them, sorted.
func (c *Compiler) changedKeys() []PodKey {
	return slices.SortedFunc(maps.Keys(c.changed), func(a, b PodKey) int {
		if a.Namespace != b.Namespace {
			return strings.Compare(a.Namespace, b.Namespace)
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// Pod is the pod named k, nil when there is none (read it, never write
// it).
func (c *Compiler) Pod(k PodKey) *Pod { return c.w.Pod(k.Namespace, k.Name) }

// podIndex is where pod k is, or would be, in c.w.Pods.
func (c *Compiler) podIndex(k PodKey) (int, bool) {
	return slices.BinarySearchFunc(c.w.Pods, k, func(p Pod, k PodKey) int {
		if p.Namespace != k.Namespace {
			return strings.Compare(p.Namespace, k.Namespace)
		}
		return strings.Compare(p.Name, k.Name)
	})
}

// SetPod adds pod p, or replaces the pod of its name (an empty namespace
// is DefaultNamespace). The compiler keeps a copy.
func (c *Compiler) SetPod(p Pod) {
	if p.Namespace == "" {
		p.Namespace = DefaultNamespace
	}
	p = Pod{Name: p.Name, Namespace: p.Namespace, Labels: maps.Clone(p.Labels), IPs: slices.Clone(p.IPs), Ports: slices.Clone(p.Ports)}
	k := PodKey{p.Namespace, p.Name}
	kept := c.keep == nil || c.keep(&p)
	i, found := c.podIndex(k)
	var old *Pod
	if found {
		o := c.w.Pods[i]
		old = &o
		if st := c.pods[k]; st.kept == kept && podEqual(old, &p) {
			return
		}
	}
	c.changePod(k, old, &p, kept)
}

// DeletePod removes pod namespace/name, if there is one.
func (c *Compiler) DeletePod(namespace, name string) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	k := PodKey{namespace, name}
	i, found := c.podIndex(k)
	if !found {
		return
	}
	old := c.w.Pods[i]
	c.changePod(k, &old, nil, false)
}

// changePod makes pod k new (nil: gone) where it was old (nil: none).
func (c *Compiler) changePod(k PodKey, old, new *Pod, kept bool) {
	// relabel: its labels alone changed, so only the selectors reading a
	// changed label can answer otherwise (changed: those labels' keys).
	relabel := old != nil && new != nil && slices.Equal(old.IPs, new.IPs) && slices.Equal(old.Ports, new.Ports)
	var changed []string
	if relabel {
		changed = changedKeys(old.Labels, new.Labels)
	}
	// The policies whose peers or egress named ports mention the pod,
	// before the change (their resolution reads the world's pods).
	touched := map[string]bool{}
	switch {
	case relabel:
		c.mentioningRelabelled(old, new, changed, touched)
	default:
		for _, p := range []*Pod{old, new} {
			if p != nil {
				c.mentioning(p, touched)
			}
		}
	}
	i, found := c.podIndex(k)
	switch {
	case new == nil:
		c.w.Pods = slices.Delete(c.w.Pods, i, i+1)
	case found:
		c.w.Pods[i] = *new
	default:
		c.w.Pods = slices.Insert(c.w.Pods, i, *new)
	}
	st := c.pods[k]
	if st == nil {
		st = &podState{}
		c.pods[k] = st
	}
	// The policies selecting it.
	if relabel {
		c.reselect(k, st, new, changed)
	} else {
		c.selectAgain(k, st, new)
	}
	// Its segments read its named ports: made again unless its labels
	// alone changed.
	st.kept, st.whole = kept, st.whole || !relabel
	if new == nil {
		delete(c.pods, k)
	}
	c.dirty[k] = true
	maps.Copy(c.stale, touched)
	c.recompute()
}

// selectAgain makes the policies selecting pod k, new (nil: gone), st.by.
func (c *Compiler) selectAgain(k PodKey, st *podState, new *Pod) {
	var now []*policyState
	if new != nil {
		// A policy may come more than once; each is tried once.
		tried := map[string]bool{}
		c.selectors[k.Namespace].candidates(new.Labels, func(key string) {
			if tried[key] {
				return
			}
			tried[key] = true
			if ps := c.policies[key]; ps != nil && c.w.selects(ps.p, new) {
				now = append(now, ps)
			}
		})
		slices.SortFunc(now, byKey)
	}
	for _, ps := range st.by {
		delete(ps.selected, k)
	}
	for _, ps := range now {
		ps.selected[k] = true
	}
	st.by = now
}

// reselect is selectAgain for pod k whose labels alone changed (the keys
// changed): only the policies whose pod selectors read a changed label
// are asked again, and st.by is edited where their answers differ.
func (c *Compiler) reselect(k PodKey, st *podState, new *Pod, changed []string) {
	c.selKeys[k.Namespace].reading(changed, func(key string) {
		ps := c.policies[key]
		if ps == nil {
			return
		}
		j, was := slices.BinarySearchFunc(st.by, ps, byKey)
		switch is := c.w.selects(ps.p, new); {
		case is && !was:
			st.by = slices.Insert(st.by, j, ps)
			ps.selected[k] = true
		case was && !is:
			st.by = slices.Delete(st.by, j, j+1)
			delete(ps.selected, k)
		}
	})
}

// mentioningRelabelled is mentioning for a pod whose labels alone changed
// from old's to new's (the keys changed): only the peers reading a
// changed label can answer otherwise.
func (c *Compiler) mentioningRelabelled(old, new *Pod, changed []string, touched map[string]bool) {
	check := func(key string) {
		if touched[key] {
			return
		}
		if ps := c.policies[key]; ps != nil && (c.mentions(ps, old) || c.mentions(ps, new)) {
			touched[key] = true
		}
	}
	c.peerKeys[new.Namespace].reading(changed, check)
	c.anyNSKeys.reading(changed, check)
}

// mentioning adds to touched the policies with a peer selecting pod p or
// an egress port named as one of p's.
func (c *Compiler) mentioning(p *Pod, touched map[string]bool) {
	check := func(key string) {
		if touched[key] {
			return
		}
		if ps := c.policies[key]; ps != nil && c.mentions(ps, p) {
			touched[key] = true
		}
	}
	c.podPeers[p.Namespace].candidates(p.Labels, check)
	c.anyNS.candidates(p.Labels, check)
	c.nsPeers.candidates(Labels(c.w.namespaceSet(p.Namespace)), check)
	for _, np := range p.Ports {
		for key := range c.named[np.Name] {
			check(key)
		}
	}
}

// mentions says whether a peer of policy ps selects pod p, or an egress
// port of it is named as one of p's.
func (c *Compiler) mentions(ps *policyState, p *Pod) bool {
	peer := func(peers []networkingv1.NetworkPolicyPeer) bool {
		for _, pe := range peers {
			if pe.IPBlock == nil && c.w.peerMatches(ps.ns, pe, netip.Addr{}, p) {
				return true
			}
		}
		return false
	}
	for _, r := range ps.p.Spec.Ingress {
		if peer(r.From) {
			return true
		}
	}
	for _, r := range ps.p.Spec.Egress {
		if peer(r.To) {
			return true
		}
		for _, pp := range r.Ports {
			if pp.Port != nil && pp.Port.StrVal != "" {
				if _, ok := p.namedPort(pp.Port.StrVal, protoOf(pp)); ok {
					return true
				}
			}
		}
	}
	return false
}

// SetNamespace gives namespace ns its labels (it is listed from now on).
func (c *Compiler) SetNamespace(ns Namespace) {
	ns.Labels = maps.Clone(ns.Labels)
	i, found := slices.BinarySearchFunc(c.w.Namespaces, ns.Name, func(n Namespace, name string) int { return strings.Compare(n.Name, name) })
	if found && maps.Equal(c.w.Namespaces[i].Labels, ns.Labels) {
		return
	}
	c.changeNamespace(ns.Name, func() {
		if found {
			c.w.Namespaces[i] = ns
		} else {
			c.w.Namespaces = slices.Insert(c.w.Namespaces, i, ns)
		}
	})
}

// DeleteNamespace forgets namespace name's labels: a pod still in it is in
// a namespace with its name's label alone, as World says.
func (c *Compiler) DeleteNamespace(name string) {
	i, found := slices.BinarySearchFunc(c.w.Namespaces, name, func(n Namespace, name string) int { return strings.Compare(n.Name, name) })
	if !found {
		return
	}
	c.changeNamespace(name, func() { c.w.Namespaces = slices.Delete(c.w.Namespaces, i, i+1) })
}

// changeNamespace runs change, which changes namespace name's labels, and
// resolves again the policies whose namespace selectors match them, before
// or after, when the namespace holds pods.
func (c *Compiler) changeNamespace(name string, change func()) {
	i, _ := c.podIndex(PodKey{name, ""})
	hasPods := i < len(c.w.Pods) && c.w.Pods[i].Namespace == name
	touched := map[string]bool{}
	mark := func() {
		l := c.w.namespaceSet(name)
		c.nsPeers.candidates(Labels(l), func(key string) {
			if !touched[key] && c.nsSelects(c.policies[key], l) {
				touched[key] = true
			}
		})
	}
	if hasPods {
		mark()
	}
	change()
	delete(c.w.memo.namespace, name)
	if !hasPods {
		return
	}
	mark()
	maps.Copy(c.stale, touched)
	c.recompute()
}

// nsSelects says whether a namespace selector of a peer of policy ps
// matches namespace labels l.
func (c *Compiler) nsSelects(ps *policyState, l labels.Set) bool {
	found := false
	ps.peers(func(pe networkingv1.NetworkPolicyPeer) {
		if !found && pe.NamespaceSelector != nil && c.w.matches(pe.NamespaceSelector, l) {
			found = true
		}
	})
	return found
}

// SetPolicy adds policy p, or replaces the policy of its key. The compiler
// keeps a copy.
func (c *Compiler) SetPolicy(p *networkingv1.NetworkPolicy) {
	key := PolicyKey(p)
	if old := c.policies[key]; old != nil {
		if reflect.DeepEqual(old.p.Spec, p.Spec) {
			return
		}
		c.drop(key, old)
	}
	q := p.DeepCopy()
	q.Namespace = policyNamespace(p)
	ps := &policyState{key: key, p: q, ns: q.Namespace, selected: map[PodKey]bool{}}
	ps.in, ps.eg = Types(q)
	c.policies[key] = ps
	c.file(key, ps, 1)
	c.stale[key] = true
	lo, _ := c.podIndex(PodKey{ps.ns, ""})
	for i := lo; i < len(c.w.Pods) && c.w.Pods[i].Namespace == ps.ns; i++ {
		pod := &c.w.Pods[i]
		if c.w.selects(q, pod) {
			k := PodKey{pod.Namespace, pod.Name}
			ps.selected[k] = true
			st := c.pods[k]
			j, _ := slices.BinarySearchFunc(st.by, ps, byKey)
			st.by = slices.Insert(st.by, j, ps)
			c.dirty[k] = true
		}
	}
	c.recompute()
}

// DeletePolicy removes policy namespace/name, if there is one.
func (c *Compiler) DeletePolicy(namespace, name string) {
	if namespace == "" {
		namespace = DefaultNamespace
	}
	key := namespace + "/" + name
	if ps := c.policies[key]; ps != nil {
		c.drop(key, ps)
		c.recompute()
	}
}

// drop takes policy key out: of its pods' policies (each made dirty), of
// the indexes and of the memo.
func (c *Compiler) drop(key string, ps *policyState) {
	for k := range ps.selected {
		st := c.pods[k]
		if j, ok := slices.BinarySearchFunc(st.by, ps, byKey); ok {
			st.by = slices.Delete(st.by, j, j+1)
		}
		c.dirty[k] = true
	}
	c.file(key, ps, -1)
	delete(c.w.memo.selectors, &ps.p.Spec.PodSelector)
	ps.peers(func(pe networkingv1.NetworkPolicyPeer) {
		delete(c.w.memo.selectors, pe.PodSelector)
		delete(c.w.memo.selectors, pe.NamespaceSelector)
	})
	delete(c.policies, key)
}

// peers calls f with every peer of the policy's rules.
func (ps *policyState) peers(f func(networkingv1.NetworkPolicyPeer)) {
	for _, r := range ps.p.Spec.Ingress {
		for _, pe := range r.From {
			f(pe)
		}
	}
	for _, r := range ps.p.Spec.Egress {
		for _, pe := range r.To {
			f(pe)
		}
	}
}

// file enters policy key in the indexes (delta 1) or takes it out (-1).
func (c *Compiler) file(key string, ps *policyState, delta int) {
	inNamespace(c.selectors, ps.ns).add(&ps.p.Spec.PodSelector, key, delta)
	inNamespace(c.selKeys, ps.ns).add(&ps.p.Spec.PodSelector, key, delta)
	ps.peers(func(pe networkingv1.NetworkPolicyPeer) {
		switch {
		case pe.IPBlock != nil:
		case pe.NamespaceSelector == nil:
			if pe.PodSelector != nil {
				inNamespace(c.podPeers, ps.ns).add(pe.PodSelector, key, delta)
				inNamespace(c.peerKeys, ps.ns).add(pe.PodSelector, key, delta)
			}
		default:
			c.nsPeers.add(pe.NamespaceSelector, key, delta)
			if pe.PodSelector != nil {
				c.anyNS.add(pe.PodSelector, key, delta)
				c.anyNSKeys.add(pe.PodSelector, key, delta)
			}
		}
	})
	for _, r := range ps.p.Spec.Egress {
		for _, pp := range r.Ports {
			if pp.Port == nil || pp.Port.StrVal == "" {
				continue
			}
			count(c.named, pp.Port.StrVal, key, delta)
		}
	}
}

// resolve resolves policy ps's rules against the world's pods and makes
// the pods it selects dirty.
func (c *Compiler) resolve(ps *policyState) {
	ps.ingress, ps.egress = ps.ingress[:0], ps.egress[:0]
	if ps.in {
		for _, r := range ps.p.Spec.Ingress {
			ps.ingress = append(ps.ingress, c.w.resolveRule(ps.ns, r.From, r.Ports, false))
		}
	}
	if ps.eg {
		for _, r := range ps.p.Spec.Egress {
			ps.egress = append(ps.egress, c.w.resolveRule(ps.ns, r.To, r.Ports, true))
		}
	}
	c.gen++
	ps.gen = c.gen
	for k := range ps.selected {
		c.dirty[k] = true
	}
}

// recompute puts the dirty pods' rules together again and notes those
// that changed.
func (c *Compiler) recompute() {
	if c.batch {
		return
	}
	for key := range c.stale {
		if ps := c.policies[key]; ps != nil {
			c.resolve(ps)
		}
	}
	clear(c.stale)
	for k := range c.dirty {
		had := c.rules[k]
		st := c.pods[k]
		if st == nil || !st.kept {
			if had != nil {
				c.note(k, had, nil)
				delete(c.rules, k)
			}
			continue
		}
		i, _ := c.podIndex(k)
		if r, d := c.assemble(&c.w.Pods[i], st, had); r != nil {
			c.note(k, had, d)
			c.rules[k] = r
		}
	}
	clear(c.dirty)
}

func byKey(a, b *policyState) int { return strings.Compare(a.key, b.key) }

func podEqual(a, b *Pod) bool {
	return a.Name == b.Name && a.Namespace == b.Namespace && maps.Equal(a.Labels, b.Labels) &&
		slices.Equal(a.IPs, b.IPs) && slices.Equal(a.Ports, b.Ports)
}

// Equal says whether two pods' rules are the same.
func (p *PodRules) Equal(o *PodRules) bool {
	return p.Pod == o.Pod && p.Namespace == o.Namespace && slices.Equal(p.IPs, o.IPs) &&
		p.Ingress.Equal(o.Ingress) && p.Egress.Equal(o.Egress)
}

// Equal says whether two sides are the same, Allow for Allow (at once when
// they share their Allows, as a Compiler's unchanged pods' rules do).
func (s Side) Equal(o Side) bool {
	if s.Isolated != o.Isolated || len(s.Allow) != len(o.Allow) {
		return false
	}
	if len(s.Allow) == 0 || &s.Allow[0] == &o.Allow[0] {
		return true
	}
	return slices.EqualFunc(s.Allow, o.Allow, (*Allow).Same)
}

// Same says whether two Allows are the same: at once when they are one
// (an Allow is shared by every pod a rule gives it to).
func (a *Allow) Same(b *Allow) bool { return a == b || a.Equal(*b) }

// Equal says whether two Allows are the same.
func (a Allow) Equal(b Allow) bool {
	return a.AnyPeer == b.AnyPeer && a.AnyPort == b.AnyPort && slices.Equal(a.Pods, b.Pods) &&
		slices.Equal(a.Ports, b.Ports) && slices.EqualFunc(a.Blocks, b.Blocks, func(x, y Block) bool {
		return x.CIDR == y.CIDR && slices.Equal(x.Except, y.Except)
	})
}

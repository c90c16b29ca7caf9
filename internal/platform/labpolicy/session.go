package labpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// A Session is a lab's policy transaction held open: the lab's lock, its
// policies (policies.json), the lab's world compiled by an incremental
// compiler (netpol.Compiler), and the provider's writer. A change that
// adds or deletes policies checks only the policies it brings, recomputes
// the rules of the pods they select, has the provider write only those
// pods' changes, and saves policies.json after the data plane holds it; on
// any error the lab and its file stay as they were. A change of the pods'
// namespaces or labels, a first load and a change of provider go the whole
// way (every policy checked and compiled again).
//
// `policy add` and `policy del` open one for their one change; `policy
// converge` holds one for its whole run, as a cluster's controller holds
// its compiler, so that its latency is the change's own.
type Session struct {
	l  *lab.Lab
	st *lab.State
	c  *Config
	// comp and rules are the compiled policies the provider holds (set
	// while c.Installed); w writes them, made at the first write.
	comp  *netpol.Compiler
	rules netpol.Rules
	w     Writer
	// enc holds each saved policy's JSON by key, so that saving after a
	// change encodes only the policies it brought (save).
	enc map[string][]byte
	// later: an incremental change's save waits for Flush (SaveLater);
	// unsaved: one waits.
	later, unsaved bool
}

// SaveLater has the session's incremental changes (Add, Del) leave
// policies.json to the next Flush (or Close): a caller holding the lab
// for a run of changes, which writes each change's file in the pause
// after it, not while the change is being shown (thousands of policies
// make the file megabytes). The lab's lock is held all the while.
func (s *Session) SaveLater() { s.later = true }

// Flush saves policies.json if a change left it to Flush.
func (s *Session) Flush() error {
	if !s.unsaved {
		return nil
	}
	if err := s.save(); err != nil {
		return err
	}
	s.unsaved = false
	return nil
}

// Writer writes a lab's compiled rules through its provider for a
// Session: old nil installs r in a lab holding none of the provider's
// objects; else it changes the objects from old to r, changes being the
// pods whose rules differ (the compiler's Changes: with the Allows that
// came and went where it knows them).
type Writer interface {
	Write(old, r *netpol.Rules, changes []netpol.PodChange) error
	Close() error
}

// Holder is a provider that keeps its objects open for a Session's writes
// (the eBPF maps with what it last wrote in them, so that a change writes
// only the keys that differ); any other provider is called afresh for each
// write (providerWriter).
type Holder interface {
	Hold(st *lab.State) (Writer, error)
}

// providerWriter writes through a provider's Install and Update.
type providerWriter struct {
	p  Provider
	st *lab.State
}

func (w providerWriter) Write(old, r *netpol.Rules, changes []netpol.PodChange) error {
	if old != nil {
		return w.p.Update(w.st, old, r, changes)
	}
	return w.p.Install(w.st, r)
}

func (providerWriter) Close() error { return nil }

// OpenSession locks lab name and reads its policies; the policies in
// force are compiled (and checked) again.
func OpenSession(name string) (*Session, error) {
	l, err := lab.Open(name)
	if err != nil {
		return nil, err
	}
	c, err := Load(name)
	if err == nil {
		var s *Session
		if s, err = sessionOf(l.State, c); err == nil {
			s.l = l
			return s, nil
		}
	}
	l.Release()
	return nil, err
}

// sessionOf is a session on lab st, whose lock the caller holds, with
// policies c in force (nil: none).
func sessionOf(st *lab.State, c *Config) (*Session, error) {
	if c == nil {
		c = &Config{}
	}
	s := &Session{st: st, c: c}
	if c.Installed {
		var err error
		if s.comp, err = compile(st, c); err != nil {
			return nil, fmt.Errorf("lab %s: its saved policies no longer compile (%v): remove %s", st.Name, err, FileName)
		}
		s.rules = s.comp.Rules()
	}
	return s, nil
}

// Close saves what waits for Flush, and releases the provider's objects
// and the lab.
func (s *Session) Close() error {
	err := s.Flush()
	if s.w != nil {
		err = errors.Join(err, s.w.Close())
	}
	if s.l != nil {
		s.l.Release()
	}
	return err
}

// State is the session's lab.
func (s *Session) State() *lab.State { return s.st }

// Config is the lab's policies as saved (read it, never write it).
func (s *Session) Config() *Config { return s.c }

// Warm has the provider write the rules in force once more, when the lab
// has policies: a held writer (eBPF) then knows both of its slots, and the
// changes after it write only their own keys. A caller measuring changes
// warms first.
func (s *Session) Warm() error {
	if !s.c.Installed {
		return nil
	}
	w, err := s.writer()
	if err != nil {
		return err
	}
	for range 2 {
		if err := w.Write(&s.rules, &s.rules, nil); err != nil {
			return err
		}
	}
	return nil
}

// dropWriter closes the provider's writer, if one was made.
func (s *Session) dropWriter() {
	if s.w != nil {
		s.w.Close()
		s.w = nil
	}
}

func (s *Session) writer() (Writer, error) {
	if s.w != nil {
		return s.w, nil
	}
	p, err := Get(s.c.Provider)
	if err != nil {
		return nil, err
	}
	if h, ok := p.(Holder); ok {
		if s.w, err = h.Hold(s.st); err != nil {
			return nil, err
		}
	} else {
		s.w = providerWriter{p: p, st: s.st}
	}
	return s.w, nil
}

// Add adds a parsed policy file (policies, namespaces and pods of the same
// name replaced), with provider for a lab that has no policies yet ("":
// DefaultProvider).
func (s *Session) Add(d netpol.Doc, provider string) (Result, error) {
	if provider != "" {
		if _, err := Get(provider); err != nil {
			return Result{}, err
		}
		if provider != s.c.Provider && s.c.Provider != "" && s.c.Installed {
			return Result{}, fmt.Errorf("lab %s's policies are enforced by %s: leave out the provider, or delete them all first to switch to %s", s.st.Name, s.c.Provider, provider)
		}
	}
	msg := fmt.Sprintf("%d policies, %d namespaces, %d pods added", len(d.Policies), len(d.Namespaces), len(d.Pods))
	if !s.c.Installed || len(d.Namespaces) > 0 || len(d.Pods) > 0 {
		return s.Edit(func(_ *lab.State, c *Config) (string, error) {
			if provider != "" {
				c.Provider = provider
			}
			c.Merge(d)
			return msg, nil
		})
	}
	w, err := s.c.World(s.st)
	if err != nil {
		return Result{}, err
	}
	seen := map[string]bool{}
	for i := range d.Policies {
		p := &d.Policies[i]
		k := netpol.PolicyKey(p)
		if seen[k] {
			return Result{}, fmt.Errorf("two policies named %s: give each its own name", k)
		}
		seen[k] = true
		if err := w.CheckPolicy(p); err != nil {
			return Result{}, err
		}
		if err := checkSCTP(netpol.PolicyUses(p, netpol.SCTP)); err != nil {
			return Result{}, err
		}
	}
	// What each policy replaces, to put back if the change fails (the
	// compiler's copy: no walk over the file's policies before the write).
	var undo []func()
	for i := range d.Policies {
		p := &d.Policies[i]
		if was := s.comp.Policy(netpol.PolicyKey(p)); was != nil {
			undo = append(undo, func() { s.comp.SetPolicy(was) })
		} else {
			undo = append(undo, func() { s.comp.DeletePolicy(p.Namespace, p.Name) })
		}
	}
	err = s.change(func() {
		for i := range d.Policies {
			s.comp.SetPolicy(&d.Policies[i])
		}
	}, func() {
		for _, u := range undo {
			u()
		}
	}, func() {
		// The policies alone (this path has no namespaces or pods), each
		// in the place of the one of its key: no index of every policy
		// made for a change of one.
		for i := range d.Policies {
			p := &d.Policies[i]
			k := netpol.PolicyKey(p)
			if j := s.policyIndex(k); j >= 0 {
				s.c.Policies[j] = *p
			} else {
				s.c.Policies = append(s.c.Policies, *p)
			}
			delete(s.enc, k)
		}
	})
	if err != nil {
		return Result{}, err
	}
	return s.result(msg), nil
}

// Del deletes policy namespace/name.
func (s *Session) Del(namespace, name string) (Result, error) {
	if namespace == "" {
		namespace = netpol.DefaultNamespace
	}
	key := namespace + "/" + name
	var was *networkingv1.NetworkPolicy
	if s.comp != nil {
		was = s.comp.Policy(key)
	}
	if was == nil {
		return Result{}, fmt.Errorf("lab %s has no policy %s/%s (see vnetlab policy ls %s)", s.st.Name, namespace, name, s.st.Name)
	}
	err := s.change(func() { s.comp.DeletePolicy(namespace, name) }, func() { s.comp.SetPolicy(was) },
		func() {
			if i := s.policyIndex(key); i >= 0 {
				s.c.Policies = slices.Delete(s.c.Policies, i, i+1)
			}
			delete(s.enc, key)
		})
	if err != nil {
		return Result{}, err
	}
	return s.result(fmt.Sprintf("policy %s/%s deleted", namespace, name)), nil
}

// policyIndex is where policy key is in the lab's file, -1 when it is not.
func (s *Session) policyIndex(key string) int {
	ns, name, _ := strings.Cut(key, "/")
	return slices.IndexFunc(s.c.Policies, func(p networkingv1.NetworkPolicy) bool {
		return p.Name == name && (p.Namespace == ns || p.Namespace == "" && ns == netpol.DefaultNamespace)
	})
}

// change applies an incremental change: do changes the compiler, the
// provider writes the pods whose rules changed, then commit changes the
// file, which is saved. When the write fails, undo puts the compiler back
// and the provider is asked to write the old rules again.
func (s *Session) change(do, undo, commit func()) error {
	w, err := s.writer()
	if err != nil {
		return err
	}
	old := s.rules
	do()
	next := s.comp.Rules()
	start := time.Now()
	if err := w.Write(&old, &next, s.comp.Changes()); err != nil {
		undo()
		if back := w.Write(&next, &old, s.comp.Changes()); back != nil {
			err = errors.Join(err, fmt.Errorf("and writing the rules in force again: %w", back))
		}
		return fmt.Errorf("policy provider %s: %w", s.c.Provider, err)
	}
	s.c.LoadSeconds = time.Since(start).Seconds()
	s.rules = next
	commit()
	if s.later {
		s.unsaved = true
		return nil
	}
	return s.save()
}

// Edit runs change on the lab's policies and applies the result the whole
// way (replace).
func (s *Session) Edit(change func(st *lab.State, c *Config) (string, error)) (Result, error) {
	next := s.c.Clone()
	msg, err := change(s.st, next)
	if err != nil {
		return Result{}, err
	}
	if err := s.replace(next); err != nil {
		return Result{}, err
	}
	return s.result(msg), nil
}

// replace makes next the lab's policies the whole way: every policy
// checked and compiled, the provider writing what differs from the rules
// in force (or installing them), next saved with its load time; on any
// error the lab and its file stay as they were.
func (s *Session) replace(next *Config) error {
	if next.Provider == "" {
		next.Provider = DefaultProvider
	}
	if s.c.Installed && next.Provider != s.c.Provider {
		return fmt.Errorf("lab %s's policies are enforced by %s: delete them all first to switch to %s", s.st.Name, s.c.Provider, next.Provider)
	}
	comp, err := compile(s.st, next)
	if err != nil {
		return err
	}
	if !s.c.Installed {
		// Nothing in force: the writer is the next provider's, afresh.
		s.dropWriter()
		s.c.Provider = next.Provider
	}
	w, err := s.writer()
	if err != nil {
		return err
	}
	r := comp.Rules()
	start := time.Now()
	if s.c.Installed {
		err = w.Write(&s.rules, &r, netpol.Diff(&s.rules, &r))
	} else if err = w.Write(nil, &r, nil); err != nil {
		s.dropWriter()
		if p, perr := Get(next.Provider); perr == nil {
			_ = p.Remove(s.st) // leave nothing half-built
		}
	}
	if err != nil {
		return fmt.Errorf("policy provider %s: %w", next.Provider, err)
	}
	next.Installed = true
	next.LoadSeconds = time.Since(start).Seconds()
	was := s.c
	s.c, s.enc = next, nil
	if err := s.save(); err != nil {
		s.c = was
		return err
	}
	s.unsaved = false
	s.comp, s.rules = comp, r
	return nil
}

// Clear removes every policy and the provider's objects: the lab as it was
// before its first policy.
func (s *Session) Clear() error {
	s.dropWriter()
	if err := Remove(s.st, s.c); err != nil {
		return err
	}
	s.c, s.comp, s.rules, s.enc, s.unsaved = &Config{}, nil, netpol.Rules{}, nil, false
	return s.save()
}

// save writes the lab's policies.json: compact, each policy's JSON kept
// from the last save unless a change brought it (a change among thousands
// of policies would otherwise spend more on writing the file than on the
// change itself).
func (s *Session) save() error {
	head := *s.c
	head.Policies = nil
	b, err := json.Marshal(&head)
	if err != nil || len(s.c.Policies) == 0 {
		if err == nil {
			err = lab.WriteBytes(s.st.Name, FileName, append(b, '\n'))
		}
		return err
	}
	// s.enc is kept in place: a change deletes the keys of the policies
	// it brings or removes, and a failed save leaves only encodings of
	// policies as they are.
	if s.enc == nil {
		s.enc = make(map[string][]byte, len(s.c.Policies))
	}
	size := len(b)
	encs := make([][]byte, len(s.c.Policies))
	for i := range s.c.Policies {
		p := &s.c.Policies[i]
		k := netpol.PolicyKey(p)
		pb, ok := s.enc[k]
		if !ok {
			if pb, err = json.Marshal(p); err != nil {
				return err
			}
			s.enc[k] = pb
		}
		encs[i] = pb
		size += len(pb) + 1
	}
	out := make([]byte, 0, size+len(`,"policies":[`)+len("]}\n"))
	out = append(append(out, b[:len(b)-1]...), `,"policies":[`...)
	for i, pb := range encs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, pb...)
	}
	return lab.WriteBytes(s.st.Name, FileName, append(out, "]}\n"...))
}

func (s *Session) result(msg string) Result {
	return Result{Lab: s.st.Name, Provider: s.c.Provider, Message: msg, Policies: len(s.c.Policies), LoadSeconds: s.c.LoadSeconds}
}

// compile checks c against lab st and compiles it into an incremental
// compiler: the provider must see the mode's packets, the kernel must have
// the protocols the policies name, and the model must pass netpol.Check.
func compile(st *lab.State, c *Config) (*netpol.Compiler, error) {
	if c.Provider == "" {
		c.Provider = DefaultProvider
	}
	if err := Check(c.Provider, st); err != nil {
		return nil, err
	}
	w, err := c.World(st)
	if err != nil {
		return nil, err
	}
	if err := netpol.Check(w); err != nil {
		return nil, err
	}
	if err := checkSCTP(w.Uses(netpol.SCTP)); err != nil {
		return nil, err
	}
	return netpol.NewCompilerOf(w, nil), nil
}

// checkSCTP refuses policies that name SCTP (uses) on a kernel without it.
func checkSCTP(uses bool) error {
	if !uses {
		return nil
	}
	if err := kernel.Check(kernel.SCTP); err != nil {
		return fmt.Errorf("a policy names protocol SCTP, which this kernel cannot carry: %v (use TCP or UDP)", err)
	}
	return nil
}

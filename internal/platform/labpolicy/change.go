package labpolicy

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// A change to a lab's policies is one transaction, as a Service change is
// (internal/platform/labservice/change.go): under the lab's lock, checked
// (the mode, the kernel, the policies) before the provider touches
// anything, applied, saved; on any error the lab and its policies.json
// stay as they were. A Session (session.go) holds one open.

// Compile checks c against lab st and compiles it: the provider must see
// the mode's packets, the kernel must have the protocols the policies
// name, and the model must pass netpol.Check.
func Compile(st *lab.State, c *Config) (*netpol.Rules, error) {
	comp, err := compile(st, c)
	if err != nil {
		return nil, err
	}
	r := comp.Rules()
	return &r, nil
}

// Commit makes lab st, whose lock the caller holds, enforce c (from old:
// nil, or not installed, the first time), recording the load time in c,
// and saves it as the lab's policies.json.
func Commit(st *lab.State, old, c *Config) error {
	s, err := sessionOf(st, old)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.replace(c)
}

// Result says what a change did, for the CLI to print.
type Result struct {
	Lab, Provider, Message string
	Policies               int
	LoadSeconds            float64
}

func (r Result) String() string {
	return fmt.Sprintf("%s: lab %s, provider %s, %d policies, loaded in %.3fs", r.Message, r.Lab, r.Provider, r.Policies, r.LoadSeconds)
}

// Edit runs change on lab name's policies under the lab's lock, applies the
// result and saves it.
func Edit(name string, change func(st *lab.State, c *Config) (string, error)) (Result, error) {
	return withSession(name, func(s *Session) (Result, error) { return s.Edit(change) })
}

// Add adds a parsed policy file to lab name (policies, namespaces and pods
// of the same name replaced), with provider for a lab that has no policies
// yet ("": DefaultProvider).
func Add(name string, d netpol.Doc, provider string) (Result, error) {
	return withSession(name, func(s *Session) (Result, error) { return s.Add(d, provider) })
}

// Del deletes policy namespace/name from lab name.
func Del(name, namespace, policy string) (Result, error) {
	return withSession(name, func(s *Session) (Result, error) { return s.Del(namespace, policy) })
}

// withSession runs one change in a session of lab name.
func withSession(name string, change func(*Session) (Result, error)) (Result, error) {
	s, err := OpenSession(name)
	if err != nil {
		return Result{}, err
	}
	res, err := change(s)
	if cerr := s.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return res, err
}

// Remove deletes c's provider objects from lab st (the lab's own teardown
// removes them with its namespaces anyway).
func Remove(st *lab.State, c *Config) error {
	if !c.Installed {
		return nil
	}
	p, err := Get(c.Provider)
	if err != nil {
		return err
	}
	if err := p.Remove(st); err != nil {
		return fmt.Errorf("policy provider %s: %w", c.Provider, err)
	}
	c.Installed = false
	return nil
}

// SavedRules compiles lab st's saved policies: what its provider should
// hold (a provider's Prove counts its objects against them).
func SavedRules(st *lab.State) (*netpol.Rules, error) {
	c, err := Load(st.Name)
	if err != nil {
		return nil, err
	}
	if !c.Installed {
		return nil, fmt.Errorf("lab %s has no policies installed", st.Name)
	}
	return Compile(st, c)
}

// Clear removes every policy of lab name and its provider's objects,
// under the lab's lock: the lab as it was before its first policy (its
// saved policies are not compiled: a file that no longer compiles is
// cleared too).
func Clear(name string) error {
	l, err := lab.Open(name)
	if err != nil {
		return err
	}
	defer l.Release()
	c, err := Load(name)
	if err != nil {
		return err
	}
	return (&Session{st: l.State, c: c}).Clear()
}

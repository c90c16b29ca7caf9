package labpolicy

import (
	"fmt"
	"slices"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// A change to a lab's policies is one transaction, as a Service change is
// (internal/platform/labservice/change.go): under the lab's lock, checked
// whole (the mode, the kernel, every policy) before the provider touches
// anything, applied, saved; on any error the lab and its policies.json
// stay as they were.

// Compile checks c against lab st and compiles it: the provider must see
// the mode's packets, the kernel must have the protocols the policies
// name, and the model must pass netpol.Check.
func Compile(st *lab.State, c *Config) (*netpol.Rules, error) {
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
	if w.Uses(netpol.SCTP) {
		if err := kernel.Check(kernel.SCTP); err != nil {
			return nil, fmt.Errorf("a policy names protocol SCTP, which this kernel cannot carry: %v (use TCP or UDP)", err)
		}
	}
	r := netpol.Compile(w)
	return &r, nil
}

// Apply makes lab st enforce c (from old, nil or not installed the first
// time), recording the load time in c.
func Apply(st *lab.State, old, c *Config) error {
	r, err := Compile(st, c)
	if err != nil {
		return err
	}
	p, _ := Get(c.Provider)
	start := time.Now()
	if old != nil && old.Installed {
		if old.Provider != c.Provider {
			return fmt.Errorf("lab %s's policies are enforced by %s: delete them all first to switch to %s", st.Name, old.Provider, c.Provider)
		}
		inForce, err := Compile(st, old)
		if err != nil {
			return fmt.Errorf("lab %s: its saved policies no longer compile (%v): remove %s", st.Name, err, FileName)
		}
		if err := p.Update(st, inForce, r, netpol.Diff(inForce, r)); err != nil {
			return fmt.Errorf("policy provider %s: %w", c.Provider, err)
		}
	} else {
		if err := p.Install(st, r); err != nil {
			_ = p.Remove(st) // leave nothing half-built
			return fmt.Errorf("policy provider %s: %w", c.Provider, err)
		}
	}
	c.Installed = true
	c.LoadSeconds = time.Since(start).Seconds()
	return nil
}

// Commit applies c to lab st and saves it as the lab's policies.json.
func Commit(st *lab.State, old, c *Config) error {
	if err := Apply(st, old, c); err != nil {
		return err
	}
	return c.Save(st.Name)
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
	st, c, msg, err := lab.EditFile(name, Load, change, Commit)
	if err != nil {
		return Result{}, err
	}
	return Result{Lab: st.Name, Provider: c.Provider, Message: msg, Policies: len(c.Policies), LoadSeconds: c.LoadSeconds}, nil
}

// Add adds a parsed policy file to lab name (policies, namespaces and pods
// of the same name replaced), with provider for a lab that has no policies
// yet ("": DefaultProvider).
func Add(name string, d netpol.Doc, provider string) (Result, error) {
	if provider != "" {
		if _, err := Get(provider); err != nil {
			return Result{}, err
		}
	}
	return Edit(name, func(st *lab.State, c *Config) (string, error) {
		if provider != "" && provider != c.Provider {
			if c.Installed {
				return "", fmt.Errorf("lab %s's policies are enforced by %s: leave out the provider, or delete them all first to switch to %s", st.Name, c.Provider, provider)
			}
			c.Provider = provider
		}
		c.Merge(d)
		return fmt.Sprintf("%d policies, %d namespaces, %d pods added", len(d.Policies), len(d.Namespaces), len(d.Pods)), nil
	})
}

// Del deletes policy namespace/name from lab name.
func Del(name, namespace, policy string) (Result, error) {
	if namespace == "" {
		namespace = netpol.DefaultNamespace
	}
	return Edit(name, func(st *lab.State, c *Config) (string, error) {
		i := slices.IndexFunc(c.Policies, func(p networkingv1.NetworkPolicy) bool { return p.Namespace == namespace && p.Name == policy })
		if i < 0 {
			return "", fmt.Errorf("lab %s has no policy %s/%s (see vnetlab policy ls %s)", st.Name, namespace, policy, st.Name)
		}
		c.Policies = slices.Delete(c.Policies, i, i+1)
		return fmt.Sprintf("policy %s/%s deleted", namespace, policy), nil
	})
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
// under the lab's lock: the lab as it was before its first policy.
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
	if err := Remove(l.State, c); err != nil {
		return err
	}
	return (&Config{}).Save(name)
}

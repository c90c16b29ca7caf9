package labpolicy

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
)

// ConvergeSpec is `policy converge`: a policy's apply latency in a lab,
// from the write of a change through the lab's policy transaction (Add,
// Del: what `policy add` and `policy del` do) to the first probe it
// governs that is let through or dropped, with a generated set present
// (the policy knobs' BenchSet): the floor under a cluster's policy
// latency, per provider.
type ConvergeSpec struct {
	Lab      string
	Provider string // for a lab without policies ("": DefaultProvider)
	// Policies and IPBlocks are generated and present (selecting the
	// probed pod, matching none of the probes) while the changes are
	// written, as the policies knob's.
	Policies, IPBlocks int
	Pace               converge.Pace
}

// The probed pod's UDP port (vnetlab whoami answers with its pod's name).
const convergePort = 5353

// The kinds of change a policy cycle writes (converge.PolicySteps).
const (
	KindAllowAdded   = converge.KindAllowAdded   // the policy allowing the probers added: the first answer
	KindAllowDeleted = converge.KindAllowDeleted // deleted again: the start of the last run of probes not answered
)

// IsolateName isolates the probed pod while no allowing policy is there
// (ingress, no rule).
const IsolateName = "vnl-isolate"

// Converge measures apply latency in lab spec.Lab: its first pod answers
// (vnetlab whoami on UDP), every other pod probes it (vnetlab kube probe,
// a "node" of the result named by its pod); spec.Policies and IPBlocks
// generated policies and one isolating the probed pod are loaded first,
// then converge.CycleSteps adds the policy allowing the probers and
// deletes it, in turn. The lab's policies are left as they were.
func Converge(ctx context.Context, spec ConvergeSpec, say func(string, ...any)) (*converge.Run, error) {
	// One session for the whole run: each change is the transaction's own
	// work (its policies checked, the pods they select compiled again, what
	// changed written), not a reading and compiling of every policy.
	s, err := OpenSession(spec.Lab)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	st, c := s.State(), s.Config()
	if len(st.Pods) < 2 {
		return nil, fmt.Errorf("lab %s has %d pods: policy converge needs 2 or more (the probed pod and a prober; vnetlab up --pods 2)", st.Name, len(st.Pods))
	}
	if c.Installed || len(c.Policies) > 0 {
		return nil, fmt.Errorf("lab %s already has policies: policy converge loads its own into a lab without any (vnetlab policy del, or a new lab)", st.Name)
	}
	if spec.Provider == "" {
		spec.Provider = DefaultProvider
	}
	if err := Check(spec.Provider, st); err != nil {
		return nil, err
	}
	if err := CheckScale(spec.Provider, spec.Policies, spec.IPBlocks); err != nil {
		return nil, err
	}
	server, probers := st.Pods[0], st.Pods[1:]
	set := BenchSet{Policies: spec.Policies, IPBlocks: spec.IPBlocks, Server: server, Clients: probers, Ports: []uint16{convergePort}}
	gen, allow, err := set.policies(st, &Config{Provider: spec.Provider})
	if err != nil {
		return nil, err
	}
	isolate := allow
	isolate.Name, isolate.Spec.Ingress = IsolateName, nil
	say("converge: loading %d policies and %d ipblocks with policy provider %s", spec.Policies, spec.IPBlocks, spec.Provider)
	res, err := s.Edit(func(_ *lab.State, c *Config) (string, error) {
		c.Provider, c.Policies = spec.Provider, append(gen, isolate)
		return "loaded", nil
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := s.Clear(); err != nil {
			say("warning: lab %s's policies: %v", st.Name, err)
		}
	}()
	if err := s.Warm(); err != nil {
		return nil, err
	}
	say("converge: loaded in %.2fs", res.LoadSeconds)
	procs, err := converge.NewLabProcs()
	if err != nil {
		return nil, err
	}
	defer procs.Stop()
	if err := procs.Backend(ctx, converge.PodRef{NS: server.NS, Name: server.Name}, convergePort); err != nil {
		return nil, err
	}
	addr := server.IP
	if addr == "" {
		addr = server.IP6
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, fmt.Errorf("pod %s's address %q: %v", server.Name, addr, err)
	}
	target := netip.AddrPortFrom(ip, convergePort).String()
	seen := converge.NewSeen()
	var refs []converge.PodRef
	for _, pod := range probers {
		refs = append(refs, converge.PodRef{NS: pod.NS, Name: pod.Name})
	}
	if err := procs.Probers(ctx, refs, []string{target}, spec.Pace, seen); err != nil {
		return nil, err
	}
	s.SaveLater()
	w := policyWriter{s: s, allow: allow}
	steps := converge.PolicySteps(target, w.add, w.del)
	out := spec.Pace.NewRun()
	out.Proxy, out.PolicyProvider, out.Policies, out.IPBlocks = "lab policy provider "+spec.Provider, spec.Provider, spec.Policies, spec.IPBlocks
	other := converge.NewOtherMeter(lab.Measured(st.Name))
	changes, err := converge.CycleSteps(ctx, steps, other.Hooks(), seen, spec.Pace, say)
	if err != nil {
		return nil, err
	}
	out.End = time.Now()
	other.End(results.PhaseChanges)
	out.OtherWork = other.Result()
	converge.Finish(out, changes, seen)
	return out, nil
}

// policyWriter writes the allowing policy's changes through the lab's
// policy transaction.
type policyWriter struct {
	s     *Session
	allow networkingv1.NetworkPolicy
}

func (w policyWriter) add(context.Context) (int64, error) {
	if err := w.settle(); err != nil {
		return 0, err
	}
	at := time.Now().UnixNano()
	_, err := w.s.Add(netpol.Doc{Policies: []networkingv1.NetworkPolicy{w.allow}}, "")
	return at, err
}

func (w policyWriter) del(context.Context) (int64, error) {
	if err := w.settle(); err != nil {
		return 0, err
	}
	at := time.Now().UnixNano()
	_, err := w.s.Del(w.allow.Namespace, w.allow.Name)
	return at, err
}

// settle does the measuring process's own work of the last change before
// the next change's write, in the pause after the last change was shown:
// it saves the lab's policies.json (SaveLater) and collects this
// process's garbage. Done right after a write, as it once was, that work
// fell inside the change's window, between the write and the probe that
// shows it, taking CPU from the probers and the kernel: at 10,000
// policies, the file (3 MB) took some 20 ms of CPU a change, and a
// collection raised the ebpf provider's p99 from 14.3 to 27.5 ms.
func (w policyWriter) settle() error {
	if err := w.s.Flush(); err != nil {
		return err
	}
	runtime.GC()
	return nil
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/converge"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
)

// kube converge --policy: a NetworkPolicy's apply latency on
// every node, from its write through the API to the first probe it lets
// through (allow-added) or drops (allow-deleted), and a pod's label
// update's, which moves the probed pod out of the allowing policy
// (label-removed) and into it again (label-added). The probed pod is the
// first backend (vnetlab whoami, UDP convBackPort), isolated for ingress
// by policyIsolate for the whole run; the probers reach its pod IP
// directly (no Service), each probe a new flow as for Services, so no
// conntrack entry of an earlier probe decides it. The cycle is the one
// `policy converge` writes in a lab (converge.PolicySteps): that is the
// floor under this.

// The run's policies (in its own namespace, deleted with it).
const (
	policyIsolate = "converge-isolate" // selects the probed pod, admits nothing
	policyAllow   = "converge-allow"   // admits the probers to its UDP port
	// allowLabel is the probed pod's label the allowing policy selects it
	// by ("yes"), besides vnetlab.pod: the label steps take it and give it back.
	allowLabel = "vnetlab.converge-allowed"
	// MaxExtraPolicies: as many as the lab's generator makes.
	MaxExtraPolicies = labpolicy.MaxGenerated
)

// checkPolicy refuses --policy's combinations that cannot run.
func (s ConvergeSpec) checkPolicy() error {
	switch {
	case s.ExtraPolicies < 0 || s.ExtraPolicies > MaxExtraPolicies:
		return fmt.Errorf("--extra-policies %d: use 0 to %d", s.ExtraPolicies, MaxExtraPolicies)
	case s.ExtraPolicies > 0 && !s.Policy:
		return errors.New("--extra-policies is the background of --policy's changes: give --policy too")
	case s.Policy && s.CRR > 0:
		return errors.New("--crr measures a Service made after Service changes: not with --policy")
	}
	return nil
}

// checkEnforcer refuses --policy on local cluster name whose enforcer
// enforces none.
func (s ConvergeSpec) checkEnforcer(name, enforcer string) error {
	if !s.Policy {
		return nil
	}
	return checkEnforcer(name, enforcer, "--policy")
}

// policyResult names the enforcer measured (enforcer, from the cluster's
// facts) and the policies present.
func policyResult(res *converge.Run, enforcer string, spec ConvergeSpec, say func(string, ...any)) {
	res.PolicyProvider, res.Policies = enforcer, spec.ExtraPolicies
	if res.PolicyProvider == "" {
		res.PolicyProvider = "unknown enforcer"
		say("converge: the cluster's NetworkPolicy enforcer is not known (not a local cluster): measuring anyway")
	}
}

// policyTarget is the probed pod's UDP address.
func (c *converger) policyTarget() string {
	return netip.AddrPortFrom(netip.MustParseAddr(c.ipA), convBackPort).String()
}

// policy is one of the run's policies selecting the probed pod for
// ingress; allow admits the probers to its UDP port.
func (c *converger) policy(name string, allow bool) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{measure.LabelKey: measure.LabelValue}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"vnetlab.pod": backendA}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if allow {
		var probers []string
		for i := range c.nodes {
			probers = append(probers, proberPod(i))
		}
		p.Spec.PodSelector.MatchLabels = map[string]string{"vnetlab.pod": backendA, allowLabel: "yes"}
		udp, port := corev1.ProtocolUDP, intstr.FromInt32(convBackPort)
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "vnetlab.pod", Operator: metav1.LabelSelectorOpIn, Values: probers}}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &port}}}}
	}
	return p
}

// policySteps waits until every node's probes of the probed pod are
// answered, isolates the pod and waits until no node's probe is answered
// (a cluster that enforces nothing is refused there), makes the extra
// policies, and returns the cycle's steps. The first wait makes the second
// mean the isolation: a prober's first probes may go unanswered while the
// pod's neighbour entry resolves, and that silence, already there at the
// isolating write, would pass for it (CI: "isolated in 7ms", and the
// enforcer's isolation then landed after the warm-up's allow was deleted,
// showing the first measured change before its write).
func (c *converger) policySteps(ctx context.Context, cfg *rest.Config) ([]converge.Step, error) {
	target := c.policyTarget()
	if _, err := c.labelAllowed(ctx, true); err != nil {
		return nil, err
	}
	if err := c.seen.WaitShown(ctx, converge.Change{Target: target, Shows: converge.ShowsAny, Written: time.Now().UnixNano()}, c.spec.ChangeTimeout); err != nil {
		return nil, fmt.Errorf("pod %s (%s) does not answer every node's probes before any policy selects it (%v): is the pod network up?", backendA, target, err)
	}
	at := time.Now().UnixNano()
	if _, err := c.cs.NetworkingV1().NetworkPolicies(c.ns).Create(ctx, c.policy(policyIsolate, false), metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create NetworkPolicy %s: %v", policyIsolate, err)
	}
	if err := c.seen.WaitShown(ctx, converge.Change{Target: target, Shows: converge.ShowsNone, Written: at}, c.spec.ChangeTimeout); err != nil {
		return nil, fmt.Errorf("pod %s (%s) still answers some node's probes after a policy isolated it (%v): does the cluster enforce NetworkPolicy?", backendA, target, err)
	}
	c.say("converge: pod %s isolated on every node in %s", backendA, time.Duration(time.Now().UnixNano()-at).Round(time.Millisecond))
	if n := c.spec.ExtraPolicies; n > 0 {
		// The lab's generated set (labpolicy.Generate): each policy selects
		// the probed pod and admits one address of a range no pod has, so
		// the enforcer holds and evaluates them and none admits a prober.
		a := netip.MustParseAddr(c.ipA)
		server := netpol.Pod{Name: backendA, Namespace: c.ns, Labels: map[string]string{"vnetlab.pod": backendA}, IPs: []netip.Addr{a}}
		gen, _, err := labpolicy.Generate(n, 0, server, nil, []netpol.Pod{server}, a.Is4(), a.Is6(), []uint16{convBackPort})
		if err != nil {
			return nil, err
		}
		took, err := measure.CreatePolicies(ctx, cfg, c.ns, gen, c.say)
		if err != nil {
			return nil, fmt.Errorf("creating %d extra policies: %v", n, err)
		}
		c.say("converge: %d extra policies selecting pod %s created in %s", n, backendA, took.Round(time.Second))
	}
	add := func(ctx context.Context) (int64, error) {
		at := time.Now().UnixNano()
		_, err := c.cs.NetworkingV1().NetworkPolicies(c.ns).Create(ctx, c.policy(policyAllow, true), metav1.CreateOptions{})
		return at, err
	}
	del := func(ctx context.Context) (int64, error) {
		at := time.Now().UnixNano()
		return at, c.cs.NetworkingV1().NetworkPolicies(c.ns).Delete(ctx, policyAllow, metav1.DeleteOptions{})
	}
	unlabel := func(ctx context.Context) (int64, error) { return c.labelAllowed(ctx, false) }
	relabel := func(ctx context.Context) (int64, error) { return c.labelAllowed(ctx, true) }
	return converge.PolicyLabelSteps(target, add, unlabel, relabel, del), nil
}

// labelAllowed gives the probed pod the label the allowing policy selects
// it by (in) or takes it away, and returns when it wrote.
func (c *converger) labelAllowed(ctx context.Context, in bool) (int64, error) {
	v := `null`
	if in {
		v = `"yes"`
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, allowLabel, v))
	at := time.Now().UnixNano()
	if _, err := c.cs.CoreV1().Pods(c.ns).Patch(ctx, backendA, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return at, fmt.Errorf("label pod %s: %v", backendA, err)
	}
	return at, nil
}

package measure

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// ExtraPolicyPrefix names the extra NetworkPolicies (ExtraPolicies).
const ExtraPolicyPrefix = "extra-policy-"

// ExtraPolicies creates n NetworkPolicies in namespace ns, each selecting
// the pods of selector for ingress and admitting one address of
// 198.18.0.0/15 (RFC 2544: no pod has it, as the extra Services'
// endpoints), so an enforcer holds and evaluates them beside the measured
// policy while they admit none of the measured flows (the lab's policies
// knob generates its set alike). ExtraWorkers calls at once, no
// client-side rate limit, say reporting progress every few seconds. It
// returns how long the writes took; on failure those made are left to the
// namespace's deletion.
func ExtraPolicies(ctx context.Context, cfg *rest.Config, ns string, selector map[string]string, n int, say func(string, ...any)) (time.Duration, error) {
	cs, err := extraClient(cfg)
	if err != nil {
		return 0, err
	}
	base := extraEndpointNet.As4()
	start := time.Now()
	var done atomic.Int64
	stop := progressEvery(5*time.Second, func() {
		say("extra policies: %d/%d created (%.0f/s)", done.Load(), n, float64(done.Load())/time.Since(start).Seconds())
	})
	err = parallel(ctx, n, func(i int) error {
		v := (uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])) + uint32(i%extraEndpoints)
		peer := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%05d", ExtraPolicyPrefix, i), Labels: map[string]string{LabelKey: LabelValue}},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: selector},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: peer.String() + "/32"}}}}}}}
		if _, err := retryAPI(ctx, func(c context.Context) error {
			_, err := cs.NetworkingV1().NetworkPolicies(ns).Create(c, p, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("NetworkPolicy %s: %v", p.Name, err)
		}
		done.Add(1)
		return nil
	})
	stop()
	return time.Since(start), err
}

// DeleteExtraPolicies deletes namespace ns's NetworkPolicies in one call
// (the enforcers drop them before the namespace goes); it works after the
// run's ctx was cancelled.
func DeleteExtraPolicies(cfg *rest.Config, ns string) error {
	cs, err := extraClient(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return cs.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

package measure

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// rangeHeadroom is what CheckServiceRange keeps of a range for the
// cluster's own Services (kubernetes, kube-dns) and a run's.
const rangeHeadroom = 100

// defaultServiceCIDR is the ServiceCIDR object the API server makes from
// its --service-cluster-ip-range: its first CIDR is the primary family,
// which a Service without ipFamilies gets its address from.
const defaultServiceCIDR = "kubernetes"

// CheckServiceRange refuses, before anything is made, n more Services
// than the cluster's Service ranges have addresses for in its primary
// family (its ServiceCIDR objects, networking.k8s.io/v1): a range full
// half-way through a long creation would fail it there. A cluster whose
// ServiceCIDRs cannot be read (before Kubernetes 1.33, or not allowed) is
// not checked.
func CheckServiceRange(ctx context.Context, cs kubernetes.Interface, n int) error {
	list, err := cs.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil || n == 0 {
		return nil
	}
	var cidrs []netip.Prefix
	primary := -1 // 4 or 6
	for _, sc := range list.Items {
		for i, c := range sc.Spec.CIDRs {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				continue
			}
			if sc.Name == defaultServiceCIDR && i == 0 {
				primary = ipVersion(p)
			}
			cidrs = append(cidrs, p)
		}
	}
	if primary < 0 {
		return nil
	}
	var names []string
	var capacity uint64
	for _, p := range cidrs {
		if ipVersion(p) == primary {
			names = append(names, p.String())
			capacity = satAdd(capacity, addresses(p))
		}
	}
	if uint64(n)+rangeHeadroom <= capacity {
		return nil
	}
	return fmt.Errorf("--extra-services %d: the cluster's IPv%d Service range (%s) has %d addresses, %d of them kept for the cluster's own Services: use at most %d, or a cluster with a larger --service-cluster-ip-range (a /12 holds 1,048,574)",
		n, primary, strings.Join(names, ", "), capacity, rangeHeadroom, max(int64(capacity)-rangeHeadroom, 0))
}

func ipVersion(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 4
	}
	return 6
}

// addresses is how many Service addresses p holds: all but its first
// (the network's) and, in IPv4, its last (the broadcast), as the API
// server's allocator counts them; saturated at 2^63.
func addresses(p netip.Prefix) uint64 {
	host := p.Addr().BitLen() - p.Bits()
	if host >= 63 {
		return 1 << 63
	}
	size := uint64(1) << host
	reserved := uint64(1)
	if p.Addr().Is4() {
		reserved = 2
	}
	return size - min(size, reserved)
}

func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

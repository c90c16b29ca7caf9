package measure

import (
	"context"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func serviceCIDR(name string, cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

// N Services beyond the primary family's ranges (every ServiceCIDR of that
// family, less the headroom) are refused in one line naming the ranges and
// the largest N; up to it they pass; a cluster without ServiceCIDRs is not
// checked.
func TestCheckServiceRange(t *testing.T) {
	ctx := context.Background()
	dual := fake.NewClientset(serviceCIDR(defaultServiceCIDR, "10.96.0.0/16", "fd00:10:96::/64"))
	if err := CheckServiceRange(ctx, dual, 65534-rangeHeadroom); err != nil {
		t.Errorf("65,434 in a /16: %v", err)
	}
	err := CheckServiceRange(ctx, dual, 100000)
	if err == nil || !strings.Contains(err.Error(), "(10.96.0.0/16) has 65534 addresses") || !strings.Contains(err.Error(), "use at most 65434") || strings.Contains(err.Error(), "fd00") {
		t.Errorf("100,000 in a /16 (IPv4 primary): %v", err)
	}
	// A second ServiceCIDR of the family adds its addresses.
	more := fake.NewClientset(serviceCIDR(defaultServiceCIDR, "10.96.0.0/16"), serviceCIDR("extra", "10.100.0.0/16"))
	if err := CheckServiceRange(ctx, more, 100000); err != nil {
		t.Errorf("100,000 in two /16s: %v", err)
	}
	if err := CheckServiceRange(ctx, fake.NewClientset(serviceCIDR(defaultServiceCIDR, "10.96.0.0/12")), 100000); err != nil {
		t.Errorf("100,000 in a /12: %v", err)
	}
	v6 := fake.NewClientset(serviceCIDR(defaultServiceCIDR, "fd00:10:96::/112"))
	if err := CheckServiceRange(ctx, v6, 70000); err == nil || !strings.Contains(err.Error(), "IPv6 Service range (fd00:10:96::/112) has 65535 addresses") {
		t.Errorf("70,000 in an IPv6 /112: %v", err)
	}
	if err := CheckServiceRange(ctx, fake.NewClientset(), 1<<30); err != nil {
		t.Errorf("no ServiceCIDRs (an older cluster): %v, want not checked", err)
	}
}

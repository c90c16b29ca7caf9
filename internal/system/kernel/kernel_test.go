package kernel

import (
	"os"
	"testing"
)

// Each probe gets its own parent: the ipvlan probe used to reuse the veth the
// macvlan probe already held, so a kernel with ipvlan was reported without it
// ("ipvlan probe failed: device or resource busy").
func TestProbesDoNotFailOnEachOther(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("probes need root (throwaway namespaces)")
	}
	once.Do(probeAll)
	for f, err := range results {
		if err != nil && !isMissing(err) {
			t.Errorf("%s: the probe itself failed, not the kernel: %v", f, err)
		}
	}
	if InGuest() {
		for _, f := range []Feature{Veth, Bridge, Macvlan, Ipvlan, Vxlan, Tun, OVSDatapath, Nftables, Netkit} {
			err := Check(f)
			if GuestLacks(string(f)) {
				if err == nil {
					t.Errorf("the guest kernel lacks %s, the probe says it has it", f)
				}
				continue
			}
			if err != nil {
				t.Errorf("the guest kernel has %s, the probe says: %v", f, err)
			}
		}
	}
}

package sock

import "testing"

// Remove unpins the socket programs' own maps and never the tc programs'
// maps they share (a veth-ebpf plane keeps its CNI's Services).
func TestIsSockPin(t *testing.T) {
	for _, name := range []string{LinksDir, sockMapSockConns, sockMapSock6Conns, sockMapSockDests, sockMapSock6Dests, sockMapSockRev, sockMapSock6Rev,
		sockMapSockAffinity, sockMapSock6Affinity, sockMapSockKeep, sockMapSock6Keep, sockMapSockStats} {
		if !IsSockPin(name) {
			t.Errorf("%s: not taken as the socket programs' own", name)
		}
	}
	for _, name := range []string{sockMapLbServices, sockMapLb6Services, sockMapLbBackends, sockMapLbConntrack, sockMapLbAffinity, sockMapLbMeta, sockMapLbStats,
		"endpoints", "uplinks", "host_via_stack_on", "pod_routes", "policy"} {
		if IsSockPin(name) {
			t.Errorf("%s: taken as the socket programs' own", name)
		}
	}
}

package main

import (
	"io"
	"strings"
	"testing"
)

// kube set-proxy's help says what it cleans, that a cluster in use is
// refused, and gives an example; without --cluster or --proxy it is
// refused in one line before it looks for any cluster.
func TestKubeSetProxyHelp(t *testing.T) {
	cmd := newKubeSetProxyCmd()
	for _, want := range []string{"kube-proxy --cleanup", "route_localnet", "socket programs", "conntrack", "is refused", "switching-proxy", "vnetlab kube set-proxy --cluster sw --proxy nftables"} {
		if !strings.Contains(cmd.Long+cmd.Example, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, f := range []string{"cluster", "proxy", "socket-lb", "timeout"} {
		if cmd.Flags().Lookup(f) == nil {
			t.Errorf("no --%s", f)
		}
	}
	cmd.SetArgs([]string{"--cluster", "none-such"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--proxy PROXY") || strings.Contains(err.Error(), "\n") {
		t.Errorf("without --proxy: %v, want one line naming --proxy", err)
	}
}

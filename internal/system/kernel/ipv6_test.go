package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A kernel without IPv6, or with it disabled for new interfaces, is named
// with the fix; one with it on passes.
func TestIPv6Disabled(t *testing.T) {
	dir := t.TempDir()
	if err := ipv6Disabled(dir); err == nil || !strings.Contains(err.Error(), "ipv6.disable=1") || !strings.Contains(err.Error(), "--ip-family ipv4") {
		t.Errorf("no net/ipv6: %v", err)
	}
	for _, conf := range []string{"all", "default"} {
		if err := os.MkdirAll(filepath.Join(dir, "net/ipv6/conf", conf), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "net/ipv6/conf", conf, "disable_ipv6"), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := ipv6Disabled(dir); err != nil {
		t.Errorf("IPv6 on: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "net/ipv6/conf/default/disable_ipv6"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := ipv6Disabled(dir)
	if err == nil || !strings.Contains(err.Error(), "net.ipv6.conf.default.disable_ipv6=1") || !isMissing(err) {
		t.Errorf("disable_ipv6=1: %v", err)
	}
}

package kernel

import (
	"fmt"
	"os"
	"strings"
)

// ipv6Disabled says why a new namespace cannot carry IPv6 (nil: it can),
// read from procSys (/proc/sys as that namespace sees it): IPv6 not built
// in or disabled at boot (ipv6.disable=1: no net/ipv6), or disabled for
// its interfaces (disable_ipv6=1, which new namespaces inherit from the
// machine's defaults when net.core.devconf_inherit_init_net says so).
func ipv6Disabled(procSys string) error {
	if _, err := os.Stat(procSys + "/net/ipv6"); err != nil {
		return missingError{"IPv6 is disabled in this kernel (no net.ipv6 sysctls: built without CONFIG_IPV6 or booted with ipv6.disable=1): use --ip-family ipv4, or boot with IPv6"}
	}
	for _, conf := range []string{"all", "default"} {
		b, err := os.ReadFile(procSys + "/net/ipv6/conf/" + conf + "/disable_ipv6")
		if v := strings.TrimSpace(string(b)); err == nil && v != "0" {
			return missingError{fmt.Sprintf("IPv6 is disabled in new namespaces (net.ipv6.conf.%s.disable_ipv6=%s): use --ip-family ipv4, or set net.ipv6.conf.default.disable_ipv6=0", conf, v)}
		}
	}
	return nil
}

package proxy

import (
	"fmt"
	"strconv"
	"time"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// DefaultTCPCloseWaitTimeout is kube-proxy's conntrack.tcpCloseWaitTimeout
// default (--conntrack-tcp-timeout-close-wait): how long the node's
// conntrack keeps an idle connection in CLOSE_WAIT, its peer gone. The
// kernel's default is 60 s.
const DefaultTCPCloseWaitTimeout = time.Hour

// closeWaitSysctl is the sysctl kube-proxy sets to it, one per network
// namespace (conntrack's timeouts are per namespace: checked on this kernel).
const closeWaitSysctl = "net.netfilter.nf_conntrack_tcp_timeout_close_wait"

// rootNetNS is the root network namespace (init's): never written.
const rootNetNS = "/proc/1/ns/net"

// setConntrackSysctls sets the CLOSE_WAIT timeout of the network namespace
// at nsPath (the node's) as kube-proxy does when it starts
// (pkg/proxy/conntrack: written only when it differs, whole seconds; 0
// leaves it). It reads and writes on a thread inside that namespace, and
// refuses the root namespace: a node's proxy must never change the
// machine's own conntrack.
func setConntrackSysctls(nsPath string, closeWait time.Duration, logf func(string, ...any)) error {
	if closeWait <= 0 {
		return nil
	}
	nsIno, err := nsutil.Inode(nsPath)
	if err != nil {
		return fmt.Errorf("node namespace %s: %w", nsPath, err)
	}
	rootIno, err := nsutil.Inode(rootNetNS)
	if err != nil {
		return fmt.Errorf("the root network namespace (%s): %w", rootNetNS, err)
	}
	if nsIno == rootIno {
		return fmt.Errorf("%s is the root network namespace: the proxy sets %s only in a node's own namespace (--conntrack-tcp-timeout-close-wait 0 leaves it)", nsPath, closeWaitSysctl)
	}
	want := strconv.Itoa(int(closeWait / time.Second))
	return nsutil.DoPath(nsPath, func() error {
		got, err := nsutil.CurrentSysctl(closeWaitSysctl)
		if err != nil {
			return fmt.Errorf("read %s in %s: %w", closeWaitSysctl, nsPath, err)
		}
		if got == want {
			return nil
		}
		if err := nsutil.WriteSysctl(closeWaitSysctl, want); err != nil {
			return err
		}
		logf("%s in %s: %s -> %s", closeWaitSysctl, nsPath, got, want)
		return nil
	})
}

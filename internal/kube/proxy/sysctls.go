package proxy

import (
	"errors"
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

// rootNetNS are the root network namespace's references, the first one
// readable counts: init's, and kthreadd's (a kernel thread's namespace is
// always the root one; init's may be unreadable even to root, as on this
// VM, whose PID 1 is not dumpable).
var rootNetNS = []string{"/proc/1/ns/net", "/proc/2/ns/net"}

// rootInode is the root network namespace's inode, or an error naming
// what was tried.
func rootInode() (uint64, error) {
	var errs []error
	for _, p := range rootNetNS {
		ino, err := nsutil.Inode(p)
		if err == nil {
			return ino, nil
		}
		errs = append(errs, err)
	}
	return 0, fmt.Errorf("the root network namespace cannot be told apart (%w)", errors.Join(errs...))
}

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
	rootIno, err := rootInode()
	if err != nil {
		// Never risk the machine's own conntrack: leave it, and say so.
		logf("%s left as it is: %v", closeWaitSysctl, err)
		return nil
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

package cluster

// Cleaning a node of every Service proxy's state before set-proxy starts
// the next one, whatever the facts say was running (a killed switch may
// have left any mix): kube-proxy's rules of both modes, vnetlab's socket
// programs, Service maps, NodePort and pod programs, the flows the maps
// and the kernel remember. What each proxy leaves is in
// docs/kubernetes-converge.md ("Switching the proxy: kube set-proxy").

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/sock"
	"github.com/vnetlab/vnetlab/internal/datapath/svcsync"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// cleanStep is one step of cleaning a node, named as its progress line
// says it.
type cleanStep string

const (
	// kube-proxy --cleanup (with a configuration of mode iptables: with
	// --cleanup it removes every mode's rules): the KUBE-* chains of nat
	// and filter, both families, and the tables ip and ip6 kube-proxy.
	cleanKubeProxy cleanStep = "kube-proxy's rules"
	// net.ipv4.conf.all.route_localnet back to 0 (kube-proxy iptables sets
	// it for NodePorts on 127.0.0.1).
	cleanRouteLocalnet cleanStep = "route_localnet"
	// vnetlab's socket programs: their cgroup links detached, their own
	// maps unpinned (sock.Remove).
	cleanSock cleanStep = "socket programs"
	// the Service maps emptied through the one reconciler (svcsync).
	cleanServices cleanStep = "Service maps"
	// the tc programs vnetlab-ebpf put on the pods' veths (another CNI
	// than veth-ebpf, where the CNI's own programs are the pods').
	cleanEndpoints cleanStep = "pods' programs"
	// the NodePort programs on the node's uplink.
	cleanUplinks cleanStep = "NodePort programs"
	// the plane's conntrack, affinity and via-stack flows, and the sticky
	// host_via_stack_on (veth-ebpf: the CNI's plane stays).
	cleanFlows cleanStep = "eBPF flows"
	// the plane removed once nothing uses it (it was a vnetlab proxy's
	// alone).
	cleanPlane cleanStep = "eBPF plane"
	// the kernel's conntrack of the node's namespace flushed (both
	// families), so that no NAT binding outlives its rules.
	cleanConntrack cleanStep = "conntrack"
)

// cleanPlan is the steps that clean a node: kube-proxy's state always;
// vnetlab's when the node has an eBPF plane (planeExists), its flows
// cleared when the CNI owns the plane (byCNI: veth-ebpf, whose programs
// on the pods stay and read its maps), the plane removed otherwise.
func cleanPlan(byCNI, planeExists bool) []cleanStep {
	steps := []cleanStep{cleanKubeProxy, cleanRouteLocalnet}
	if planeExists {
		steps = append(steps, cleanSock, cleanServices)
		if !byCNI {
			steps = append(steps, cleanEndpoints)
		}
		steps = append(steps, cleanUplinks)
		if byCNI {
			steps = append(steps, cleanFlows)
		} else {
			steps = append(steps, cleanPlane)
		}
	}
	return append(steps, cleanConntrack)
}

// cleanProxyState cleans node n of every proxy's state (cleanPlan).
func (b *builder) cleanProxyState(ctx context.Context, n node) error {
	c := &cleaner{b: b, n: n, plane: ProxyPlane(b.spec.Name, n.name)}
	defer c.close()
	steps := cleanPlan(b.spec.programsByCNI(), exists(tcbpf.PinDir(c.plane)))
	var names []string
	for _, s := range steps {
		names = append(names, string(s))
	}
	b.say("node %s: cleaning %s", n.name, strings.Join(names, ", "))
	for _, s := range steps {
		if err := c.do(ctx, s); err != nil {
			return fmt.Errorf("cleaning %s: %w", s, err)
		}
	}
	return nil
}

// cleaner runs one node's steps, opening its plane once for those that
// need it.
type cleaner struct {
	b     *builder
	n     node
	plane string
	tc    *tcbpf.Plane
}

func (c *cleaner) close() {
	if c.tc != nil {
		c.tc.Close()
		c.tc = nil
	}
}

// open opens the node's plane (it exists: cleanPlan asks only then).
func (c *cleaner) open() (*tcbpf.Plane, error) {
	if c.tc == nil {
		p, err := tcbpf.OpenFamily(c.plane, c.b.addrs.fam)
		if err != nil {
			return nil, fmt.Errorf("%w (a plane made by another vnetlab build cannot be cleaned in place: `vnetlab kube down %s`, then kube up)", err, c.b.spec.Name)
		}
		c.tc = p
	}
	return c.tc, nil
}

func (c *cleaner) do(ctx context.Context, s cleanStep) error {
	switch s {
	case cleanKubeProxy:
		return c.b.cleanKubeProxy(ctx, c.n)
	case cleanRouteLocalnet:
		return nsutil.Sysctl(c.n.ns, "net.ipv4.conf.all.route_localnet", "0")
	case cleanSock:
		return sock.Remove(c.plane)
	case cleanServices:
		p, err := c.open()
		if err != nil {
			return err
		}
		sy, err := svcsync.NewSyncer(p)
		if err != nil {
			return err
		}
		ch, err := sy.Prune()
		if ch.Deleted > 0 {
			c.b.say("node %s: %d Service entries deleted", c.n.name, ch.Deleted)
		}
		return err
	case cleanEndpoints:
		p, err := c.open()
		if err != nil {
			return err
		}
		eps, err := p.ListEndpoints()
		if err != nil {
			return err
		}
		var errs []error
		for _, ep := range eps {
			errs = append(errs, p.DetachEndpoint(ep.NS, ep.Ifname))
		}
		return errors.Join(errs...)
	case cleanUplinks:
		p, err := c.open()
		if err != nil {
			return err
		}
		return p.DetachUplinks()
	case cleanFlows:
		n, err := tcbpf.ClearFlows(c.plane)
		if n > 0 {
			c.b.say("node %s: %d eBPF flow entries deleted", c.n.name, n)
		}
		if err != nil {
			return err
		}
		return tcbpf.ResetViaStack(c.plane)
	case cleanPlane:
		p, err := c.open()
		if err != nil {
			return err
		}
		users, err := p.Users()
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return fmt.Errorf("%s is still used (%s): not removed", p.Dir(), strings.Join(users, "; "))
		}
		c.close()
		return tcbpf.Remove(c.plane)
	case cleanConntrack:
		return flushConntrack(c.n.ns)
	}
	return fmt.Errorf("no such step %q", s)
}

// cleanKubeProxy runs `kube-proxy --cleanup` in node n's namespace (its
// output in the node's kube-proxy-cleanup log), then checks what it left:
// its exit status alone says little (it also tears down IPVS, which this
// machine may lack).
func (b *builder) cleanKubeProxy(ctx context.Context, n node) error {
	if err := b.writeKubeProxyConfig(n, kubeProxyCleanupConfig, clusternet.IPTables); err != nil {
		return err
	}
	out, runErr := proc.Command(ctx, n.ns, b.k8s(binaries.KubeProxy), "--cleanup", "--config", filepath.Join(n.dir, kubeProxyCleanupConfig)).CombinedOutput()
	logName := n.name + "-kube-proxy-cleanup"
	if err := os.MkdirAll(filepath.Dir(b.logPath(logName)), 0o755); err == nil {
		_ = os.WriteFile(b.logPath(logName), out, 0o644)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	left, err := kubeProxyLeft(ctx, n.ns, "")
	if err != nil {
		return err
	}
	if left != "" {
		return fmt.Errorf("kube-proxy --cleanup (%v) left %s: see %s", runErr, left, b.logPath(logName))
	}
	return nil
}

// flushConntrack deletes every conntrack entry of namespace ns, both
// families.
func flushConntrack(ns string) error {
	return nsutil.Do(ns, func() error {
		if err := netlink.ConntrackTableFlush(netlink.ConntrackTable); err != nil {
			return fmt.Errorf("flush conntrack: %w", err)
		}
		// The flush above is sent as IPv4's; a kernel that flushes by
		// family leaves IPv6's, deleted here one by one.
		if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET6, everyFlow{}); err != nil {
			return fmt.Errorf("flush IPv6 conntrack: %w", err)
		}
		return nil
	})
}

// everyFlow matches every conntrack entry.
type everyFlow struct{}

func (everyFlow) MatchConntrackFlow(*netlink.ConntrackFlow) bool { return true }

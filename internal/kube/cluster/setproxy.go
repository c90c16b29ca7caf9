package cluster

// Switching a running local cluster's Service proxy in place (kube
// set-proxy): the N Services made once are measured under every proxy.
// The old proxy is stopped, every proxy's state is cleaned from every node
// whatever the facts say (setproxy_clean.go), the new one is started as
// kube up starts it and waited for until its first sync is done on every
// node (setproxy_sync.go), and nothing of another proxy may be left
// (ProxyLeftovers).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// StatusSwitchingProxy is a local cluster's status from the moment
// set-proxy starts changing it until its new proxy is in force: Load
// refuses the cluster meanwhile, and a set-proxy that failed or was killed
// leaves it so, for a second one to complete.
const StatusSwitchingProxy = "switching-proxy"

// errSwitching is Load's refusal of a cluster whose switch has not
// finished, naming the two ways out.
func errSwitching(st *lab.State) error {
	to := st.Facts[FactSwitchingTo]
	if to == "" {
		to = "PROXY"
	}
	return fmt.Errorf("cluster %s is switching its Service proxy (a kube set-proxy did not finish): complete it with `vnetlab kube set-proxy --cluster %s --proxy %s`, or remove the cluster with `vnetlab kube down %s`",
		st.Name, st.Name, to, st.Name)
}

// ProxySwitch is what SetProxy did.
type ProxySwitch struct {
	From, To string // the proxies as kube ls names them (Network.ProxyText)
	// Services: the Services the API held as the new proxy started (each
	// node's first sync programmed them all).
	Services int
	Nodes    []NodeSync
	Took     time.Duration
	// Unchanged: the cluster ran the proxy already; nothing was done.
	Unchanged bool
}

// NodeSync is one node's new proxy after its first sync.
type NodeSync struct {
	Node string
	PID  int
	// FirstSync: from the proxies' start to the end of the node's first
	// successful sync (its kubeproxy_sync_proxy_rules_last_timestamp_seconds).
	FirstSync time.Duration
	// CPU, RSS and PeakRSS: the process's use by then.
	CPU          time.Duration
	RSS, PeakRSS int64
}

// switchWait bounds how long the new proxies may take when no timeout is
// given: two minutes, and a minute more per 5,000 Services (kube-proxy
// iptables' first sync of 100,000 Services takes minutes on this machine).
func switchWait(services int) time.Duration {
	return 2*time.Minute + time.Duration(services/5000)*time.Minute
}

// SetProxy makes local cluster name run proxy (clusternet.Proxies; with
// socketLB, vnetlab-ebpf's socket LB) in place of the one it runs: it
// takes the cluster's lock, checks the proxy against the cluster's CNI and
// NetworkPolicy enforcer (Spec.Validate), marks it StatusSwitchingProxy,
// stops the old proxies, cleans every proxy's state off every node,
// records the new proxy in the facts (with FactProxySince), starts it as
// kube up does, waits until every node's first sync is done (timeout; 0:
// sized by the Services present) and the cluster's DNS answers through
// it, checks that nothing of another proxy is left, then marks the
// cluster ready. A failure after the mark leaves it, so that Load refuses
// the cluster until a set-proxy completes.
func SetProxy(ctx context.Context, name, proxy string, socketLB bool, timeout time.Duration, say func(string, ...any)) (*ProxySwitch, error) {
	if say == nil {
		say = func(string, ...any) {}
	}
	start := time.Now()
	st, err := switchable(name)
	if err != nil {
		return nil, err
	}
	spec, err := switchSpec(st, proxy, socketLB)
	if err != nil {
		return nil, err
	}
	l, err := lab.Open(name)
	if errors.Is(err, lab.ErrInUse) {
		return nil, fmt.Errorf("cluster %s is %w (a kube converge, kube run, set-proxy or down): wait for it to end, then run set-proxy again", name, lab.ErrInUse)
	}
	if err != nil {
		return nil, err
	}
	defer l.Release()
	// Read again under the lock: a set-proxy may have ended meanwhile.
	if l.State, err = switchable(name); err != nil {
		return nil, err
	}
	st = l.State
	sw := &ProxySwitch{From: Network(st).ProxyText(), To: spec.Network().ProxyText()}
	if st.Status == "ready" && Network(st) == spec.Network() {
		say("cluster %s already runs %s: nothing to switch", name, sw.To)
		sw.Took, sw.Unchanged = time.Since(start), true
		return sw, nil
	}
	nodes, err := nodesOf(st, addrPlan{fam: Family(st)})
	if err != nil {
		return nil, err
	}
	self, bin, err := programsFor(ctx, proxy, say)
	if err != nil {
		return nil, err
	}
	st.Status, st.Facts[FactSwitchingTo] = StatusSwitchingProxy, proxyFlags(proxy, socketLB)
	if err := l.Save(); err != nil {
		return nil, err
	}
	fail := func(err error) (*ProxySwitch, error) {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted (%v): %w", ctx.Err(), err)
		}
		return nil, fmt.Errorf("cluster %s stays %s: %w (run the same set-proxy again to complete the switch, or `vnetlab kube down %s`)", name, StatusSwitchingProxy, err, name)
	}
	b := &builder{l: l, spec: spec, addrs: addrPlan{fam: Family(st)}, dir: lab.Dir(name), bin: bin, self: self, say: say}
	b.nodes = nodes
	say("switching cluster %s's Service proxy from %s to %s", name, sw.From, sw.To)
	if err := stopProxies(ctx, name, say); err != nil {
		return fail(err)
	}
	for _, n := range b.nodes {
		if err := b.cleanProxyState(ctx, n); err != nil {
			return fail(fmt.Errorf("node %s: %w", n.name, err))
		}
	}
	cs, err := Client(st.Facts[FactKubeconfig])
	if err != nil {
		return fail(err)
	}
	if sw.Services, err = countServices(ctx, cs); err != nil {
		return fail(err)
	}
	if timeout <= 0 {
		timeout = switchWait(sw.Services)
	}
	facts := spec.networkFacts()
	for _, k := range []string{FactProxy, FactCNI, FactPolicy} {
		st.Facts[k] = facts[k]
	}
	delete(st.Facts, FactSocketLB)
	if socketLB {
		st.Facts[FactSocketLB] = "true"
	}
	since := time.Now()
	st.Facts[FactProxySince] = since.UTC().Format(time.RFC3339)
	if err := l.Save(); err != nil {
		return fail(err)
	}
	say("starting %s on %d nodes (%d Services to sync; waiting up to %s)", spec.proxyProcess(), len(b.nodes), sw.Services, timeout)
	pids := map[string]int{}
	for _, n := range b.nodes {
		if err := b.writeKubeProxyConfig(n, kubeProxyConfig, proxy); err != nil {
			return fail(err)
		}
		if err := b.startProxy(n, InternalKubeconfig(name)); err != nil {
			return fail(fmt.Errorf("node %s: %w", n.name, err))
		}
		pids[n.name] = b.daemons[len(b.daemons)-1].pid
	}
	if sw.Nodes, err = b.waitSynced(ctx, since, timeout, pids); err != nil {
		return fail(err)
	}
	// A first sync of many Services can keep the nodes' kubelets from the
	// API server for minutes (kube-proxy nftables' of 30,000 Services of 10
	// endpoints did: both nodes NotReady after it). The switch ends with
	// the cluster usable.
	if n := readyNodes(ctx, cs); n < len(b.nodes) {
		say("waiting for %d of %d nodes to be Ready again", len(b.nodes)-n, len(b.nodes))
	}
	if err := b.waitNodesReady(ctx, cs, "to be Ready again"); err != nil {
		return fail(err)
	}
	for _, n := range b.nodes {
		if err := waitDNS(ctx, b.addrs, b.dnsQuery(ctx, n)); err != nil {
			return fail(fmt.Errorf("node %s, through its new proxy: %w", n.name, err))
		}
	}
	if err := b.checkDaemons(); err != nil {
		return fail(err)
	}
	if left := ProxyLeftovers(ctx, st, spec.Network()); left != "" {
		return fail(fmt.Errorf("another proxy's state is left: %s", left))
	}
	st.Status = "ready"
	delete(st.Facts, FactSwitchingTo)
	if err := l.Save(); err != nil {
		return nil, err
	}
	sw.Took = time.Since(start)
	return sw, nil
}

// switchable loads local cluster name, refusing one that is not ready
// (nor mid-switch: a set-proxy completes it).
func switchable(name string) (*lab.State, error) {
	st, err := lab.Load(name)
	if err != nil {
		return nil, fmt.Errorf("no local cluster named %q (see `vnetlab kube ls`)", name)
	}
	if err := usable(st); err != nil && st.Status != StatusSwitchingProxy {
		return nil, err
	}
	if st.Facts == nil {
		st.Facts = map[string]string{}
	}
	return st, nil
}

// switchSpec is the spec of cluster st as kube up made it (its nodes, CNI,
// family, zones and NetworkPolicy enforcer, from the facts), with proxy
// and socketLB, checked as kube up checks it: a proxy the cluster's CNI or
// enforcer cannot run with is refused, naming why.
func switchSpec(st *lab.State, proxy string, socketLB bool) (Spec, error) {
	n := Network(st)
	for _, name := range []string{n.Proxy, proxy} {
		if p, err := clusternet.GetProxy(name); err == nil && p.CNI != "" {
			return Spec{}, fmt.Errorf("cluster %s cannot switch from %s to %s: %s is %s's agent's own, set when kube up starts it", st.Name, n.Proxy, proxy, p.Name, p.CNI)
		}
	}
	s := Spec{Name: st.Name, Nodes: len(st.Nodes), Proxy: proxy, SocketLB: socketLB, CNI: n.CNI, Family: Family(st), NetworkPolicy: n.Policy}
	switch n.CNI {
	case clusternet.CNIVnetlab:
		s.CNIMode = n.CNIMode
	case clusternet.CNIFlannel:
		s.FlannelBackend = n.CNIMode
	}
	if z, err := strconv.Atoi(st.Facts[FactZones]); err == nil {
		s.Zones = z
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("cluster %s (CNI %s, NetworkPolicy %s: kube up's) cannot switch: %w", st.Name, n.CNIText(), n.Policy, err)
	}
	return s, nil
}

// proxyFlags is how set-proxy's flags name a proxy.
func proxyFlags(proxy string, socketLB bool) string {
	if socketLB {
		return proxy + " --socket-lb"
	}
	return proxy
}

// nodesOf are the nodes of cluster st as kube up built them (what starting
// a proxy needs: name, namespace, directory, addresses).
func nodesOf(st *lab.State, a addrPlan) ([]node, error) {
	var out []node
	for i, ns := range st.Nodes {
		if ns.NS == "" {
			// An empty namespace would run the cleaning (kube-proxy
			// --cleanup) in the root namespace.
			return nil, fmt.Errorf("cluster %s's node %s has no network namespace recorded: remove it with `vnetlab kube down %s`", st.Name, ns.Name, st.Name)
		}
		out = append(out, node{name: ns.Name, ns: ns.NS, dir: filepath.Join(lab.Dir(st.Name), ns.Name), ips: a.nodeIPs(i + 1), podRanges: a.podCIDRs(i + 1)})
	}
	return out, nil
}

// stopProxies stops every node proxy of cluster name (kube-proxy or
// vnetlab's, whatever the facts say: a killed switch may have started the
// new one), with what each left running of the programs it ran
// (proc.StopGroup), and waits until each has exited.
func stopProxies(ctx context.Context, name string, say func(string, ...any)) error {
	type running struct {
		d     Daemon
		start uint64
	}
	var rs []running
	for _, pid := range lab.Procs(name) {
		d, ok := daemonAt(pid)
		if !ok || d.Role != RoleProxy {
			continue
		}
		start, err := proc.StartTime(pid)
		if err != nil {
			continue // gone meanwhile
		}
		d.PID = pid
		rs = append(rs, running{d, start})
	}
	for _, r := range rs {
		say("node %s: stopping its proxy (pid %d)", r.d.Node, r.d.PID)
		proc.StopGroup(r.d.PID, r.start, 5*time.Second)
	}
	return waitFor(ctx, 30*time.Second, "the old proxies to exit", func() bool {
		for _, r := range rs {
			if proc.Alive(r.d.PID, r.start) {
				return false
			}
		}
		return true
	})
}

// countServices is how many Services the API holds, from a listing of
// one (the API says how many remain), not a listing of them all.
func countServices(ctx context.Context, cs kubernetes.Interface) (int, error) {
	l, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("count the Services: %w", err)
	}
	n := len(l.Items)
	switch {
	case l.RemainingItemCount != nil:
		n += int(*l.RemainingItemCount)
	case l.Continue != "":
		// The server did not count the rest: list them all, from its cache.
		all, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return 0, fmt.Errorf("count the Services: %w", err)
		}
		n = len(all.Items)
	}
	return n, nil
}

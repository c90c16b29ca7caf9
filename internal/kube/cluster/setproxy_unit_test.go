package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// stateRootForTest points the labs' state at a directory of the test's own.
func stateRootForTest(t *testing.T) {
	t.Helper()
	root := lab.StateRoot
	lab.StateRoot = t.TempDir()
	t.Cleanup(func() { lab.StateRoot = root })
}

// fakeCluster writes the state of a 2-node cluster built with spec
// (nothing runs: what set-proxy reads before it changes anything), with
// status, and returns its lab, still locked.
func fakeCluster(t *testing.T, spec Spec, status string) *lab.Lab {
	t.Helper()
	l, err := lab.Reserve(spec.Name, lab.KubeMode)
	if err != nil {
		t.Fatal(err)
	}
	l.State.Facts = spec.networkFacts()
	for i := 1; i <= spec.Nodes; i++ {
		l.State.Nodes = append(l.State.Nodes, lab.NodeState{Name: NodeName(spec.Name, i), NS: lab.NSName(spec.Name, "node")})
	}
	l.State.Status = status
	if err := l.Save(); err != nil {
		t.Fatal(err)
	}
	return l
}

// set-proxy refuses, in one line naming the fix and before it changes
// anything: a cluster that does not exist or is a lab, one kube up is
// still building, one in use by another process, and a proxy the
// cluster's CNI or NetworkPolicy enforcer cannot run with (kube up's own
// checks: Spec.Validate), or socket LB without vnetlab-ebpf. A cluster
// left mid-switch is refused by Load, naming the set-proxy that completes
// it. The enforcer a cluster was built with stays: vnetlab-ebpf on
// veth-ebpf does not bring vnetlab's enforcer to a cluster made with none.
func TestSetProxyRefused(t *testing.T) {
	stateRootForTest(t)
	ctx := context.Background()
	refused := func(name, proxy string, socketLB bool, says ...string) {
		t.Helper()
		_, err := SetProxy(ctx, name, proxy, socketLB, time.Minute, nil)
		if err == nil {
			t.Errorf("set-proxy %s --proxy %s: not refused", name, proxy)
			return
		}
		for _, s := range says {
			if !strings.Contains(err.Error(), s) || strings.Contains(err.Error(), "\n") {
				t.Errorf("set-proxy %s --proxy %s: %q, want one line with %q", name, proxy, err, s)
			}
		}
	}
	refused("none-such", "nftables", false, `no local cluster named "none-such"`)
	l, err := lab.Reserve("alab", "veth-routed")
	if err != nil {
		t.Fatal(err)
	}
	l.State.Status = "ready"
	_ = l.Save()
	l.Release()
	refused("alab", "nftables", false, "not a local cluster")

	fakeCluster(t, Spec{Name: "kb", Nodes: 2, Proxy: "iptables"}, "building").Release()
	refused("kb", "nftables", false, "cluster kb is building", "vnetlab kube down kb")

	fakeCluster(t, Spec{Name: "ke", Nodes: 2, Proxy: "vnetlab-ebpf", CNI: "vnetlab", CNIMode: "veth-ebpf"}, "ready").Release()
	refused("ke", "iptables", false, "--network-policy vnetlab with --cni-mode veth-ebpf", "use --proxy vnetlab-ebpf|vnetlab-sock")
	refused("ke", "nftables", false, "--network-policy vnetlab")
	refused("ke", "vnetlab-sock", true, "--socket-lb")
	if st, err := Load("ke"); err != nil || Network(st).Proxy != "vnetlab-ebpf" {
		t.Errorf("after the refusals: %v, proxy %v; want ready and unchanged", err, st)
	}

	held := fakeCluster(t, Spec{Name: "kh", Nodes: 2, Proxy: "iptables"}, "ready")
	refused("kh", "nftables", false, "cluster kh is in use by another vnetlab process")
	held.Release()

	// A cluster with no enforcer can switch to any proxy, and keeps none.
	none := fakeCluster(t, Spec{Name: "kn", Nodes: 2, Proxy: "iptables", CNI: "vnetlab", CNIMode: "veth-ebpf", NetworkPolicy: "none"}, "ready")
	none.Release()
	refused("kn", "ipvs", false, `--proxy "ipvs"`, "vnetlab-ebpf")
	if sw, err := SetProxy(ctx, "kn", "iptables", false, time.Minute, nil); err != nil || !sw.Unchanged || sw.To != "iptables" {
		t.Errorf("set-proxy to the proxy kn runs: %+v, %v; want nothing switched", sw, err)
	}
	if st, err := Load("kn"); err != nil {
		t.Errorf("after a set-proxy to the same proxy: %v; want it ready", err)
	} else if st.Facts[FactProxySince] != "" {
		t.Errorf("after a set-proxy to the same proxy: proxy_since %q; want no switch recorded", st.Facts[FactProxySince])
	}
	for _, p := range []struct {
		proxy    string
		socketLB bool
	}{{"iptables", false}, {"nftables", false}, {"vnetlab-ebpf", false}, {"vnetlab-ebpf", true}, {"vnetlab-sock", false}} {
		s, err := switchSpec(none.State, p.proxy, p.socketLB)
		if err != nil {
			t.Errorf("--proxy %s (socket LB %t) on veth-ebpf without an enforcer: %v", p.proxy, p.socketLB, err)
			continue
		}
		if n := s.Network(); n.Policy != "none" || n.CNIMode != "veth-ebpf" || n.Proxy != p.proxy || n.SocketLB != p.socketLB {
			t.Errorf("--proxy %s: the switched spec's network %+v", p.proxy, n)
		}
		if !s.programsByCNI() {
			t.Errorf("--proxy %s: veth-ebpf's plane not taken as the CNI's", p.proxy)
		}
	}

	mid := fakeCluster(t, Spec{Name: "km", Nodes: 2, Proxy: "iptables"}, StatusSwitchingProxy)
	mid.State.Facts[FactSwitchingTo] = proxyFlags("vnetlab-ebpf", true)
	_ = mid.Save()
	mid.Release()
	_, err = Load("km")
	if want := "`vnetlab kube set-proxy --cluster km --proxy vnetlab-ebpf --socket-lb`"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "vnetlab kube down km") {
		t.Errorf("Load of a cluster mid-switch: %v, want a refusal naming %s and kube down", err, want)
	}
}

// The cleanup's steps per CNI and state: kube-proxy's rules, route_localnet
// and conntrack on every node; vnetlab's only where a plane exists; a
// plane no CNI owns goes with its pods' programs, veth-ebpf's stays with
// its flows cleared; the Service maps are emptied before the flows and
// conntrack, the kernel's conntrack last.
func TestCleanupPlan(t *testing.T) {
	for _, c := range []struct {
		byCNI, plane bool
		want         []cleanStep
	}{
		{false, false, []cleanStep{cleanKubeProxy, cleanRouteLocalnet, cleanConntrack}},
		{true, false, []cleanStep{cleanKubeProxy, cleanRouteLocalnet, cleanConntrack}},
		{false, true, []cleanStep{cleanKubeProxy, cleanRouteLocalnet, cleanSock, cleanServices, cleanEndpoints, cleanUplinks, cleanPlane, cleanConntrack}},
		{true, true, []cleanStep{cleanKubeProxy, cleanRouteLocalnet, cleanSock, cleanServices, cleanUplinks, cleanFlows, cleanConntrack}},
	} {
		if got := cleanPlan(c.byCNI, c.plane); !slices.Equal(got, c.want) {
			t.Errorf("CNI's plane %t, plane there %t: %q, want %q", c.byCNI, c.plane, got, c.want)
		}
	}
	for _, s := range []Spec{{}, {CNI: "flannel"}, {CNI: "vnetlab"}, {CNI: "vnetlab", CNIMode: "bridge"}} {
		if s.programsByCNI() {
			t.Errorf("--cni %q --cni-mode %q: its plane taken as the CNI's", s.CNI, s.CNIMode)
		}
	}
}

// What ProxyLeftovers reads of kube-proxy: its two tables in `nft list
// tables` (not another's), and its iptables mode's chains in
// iptables-save (not kubelet's canaries, nor kube-router's).
func TestKubeProxyRulesRead(t *testing.T) {
	tables := kubeProxyTables("table inet vnetlab-netpol\ntable ip kube-proxy\ntable ip6 kube-proxy\ntable ip nat\n")
	if !slices.Equal(tables, []string{"table ip kube-proxy", "table ip6 kube-proxy"}) {
		t.Errorf("tables %q", tables)
	}
	saved := `*mangle
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
*filter
:KUBE-FIREWALL - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-ROUTER-INPUT - [0:0]
-A INPUT -j KUBE-PROXY-FIREWALL
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-ABC - [0:0]
:KUBE-SEP-DEF - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A KUBE-SERVICES -j KUBE-SVC-ABC
COMMIT
`
	if n := kubeProxyChains(saved); n != 6 {
		t.Errorf("%d kube-proxy chains, want 6 (KUBE-PROXY-FIREWALL, KUBE-SERVICES, KUBE-SVC-ABC, KUBE-SEP-DEF, KUBE-POSTROUTING, KUBE-MARK-MASQ)", n)
	}
}

// The first sync is read from kubeproxy_sync_proxy_rules_last_timestamp_seconds:
// absent or 0 is not yet; with a series per family, the later family
// must have synced too (the earliest is taken).
func TestParseLastSync(t *testing.T) {
	for _, c := range []struct {
		page string
		want time.Time
	}{
		{"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1\n", time.Time{}},
		{"# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds 0\n", time.Time{}},
		{"# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7645e+09\n", time.Unix(1764500000, 0)},
		{"# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} 1764500010.5\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv6\"} 1764500001\n", time.Unix(1764500001, 0)},
	} {
		got, err := parseLastSync(c.page)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%q: %v (%v), want %v", c.page, got, err, c.want)
		}
	}
}

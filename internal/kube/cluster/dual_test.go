package cluster

import (
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// A dual-stack cluster (kube up --ip-family dual), its pods wired by
// vnetlab's CNI in mode veth-routed, kube-proxy iptables: nodes have an
// InternalIP of each family; pods get an address of each from their node's
// ranges and reach each other same-node and cross-node over both; a
// PreferDualStack Service answers on both ClusterIPs (same-node and
// cross-node); CoreDNS answers its AAAA record; `kube run --ip-family dual`
// measures an IPv4 and an IPv6 cell per path, each dialing an address of
// its family in the cluster's ranges; `kube down` leaves nothing.
func TestDualStackCluster(t *testing.T) {
	needCluster(t)
	const name = "vkd"
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	st := upTestCluster(ctx, t, Spec{Name: name, Nodes: 2, Proxy: clusternet.IPTables, CNI: clusternet.CNIVnetlab, CNIMode: modes.VethRouted, Family: family.Dual}, nil)
	if Family(st) != family.Dual {
		t.Errorf("fact %s = %q, want dual", FactFamily, st.Facts[FactFamily])
	}
	cs, err := Client(st.Facts[FactKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		var fams []family.Family
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				fams = append(fams, family.OfString(a.Address))
			}
		}
		if !slices.Equal(fams, []family.Family{family.IPv4, family.IPv6}) {
			t.Errorf("node %s's InternalIPs are of %v, want ipv4 then ipv6: %v", n.Name, fams, n.Status.Addresses)
		}
	}
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dual-test"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2 := st.Nodes[0].Name, st.Nodes[1].Name
	servers := map[string]int{"srv1": 1, "srv2": 2}
	for s, i := range servers {
		if _, err := cs.CoreV1().Pods(ns.Name).Create(ctx, pathServer(st.Facts[FactImage], s, NodeName(name, i), "--bind", "::"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policy := corev1.IPFamilyPolicyPreferDualStack
	svc, err := cs.CoreV1().Services(ns.Name).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "srv2"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "srv2"}, IPFamilyPolicy: &policy,
			Ports: []corev1.ServicePort{{Port: 7001, TargetPort: intstr.FromInt32(7001)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.ClusterIPs) != 2 || !mustCIDR(serviceCIDR).Contains(net.ParseIP(svc.Spec.ClusterIPs[0])) || !mustCIDR(serviceCIDR6).Contains(net.ParseIP(svc.Spec.ClusterIPs[1])) {
		t.Fatalf("PreferDualStack Service got ClusterIPs %v, want one of %s and one of %s", svc.Spec.ClusterIPs, serviceCIDR, serviceCIDR6)
	}
	// ips[server][family] is the server's address of that family.
	ips := map[string]map[family.Family]string{}
	for s, i := range servers {
		p := waitPod(ctx, t, cs, ns.Name, s, corev1.PodRunning)
		ips[s] = map[family.Family]string{}
		for _, ip := range p.Status.PodIPs {
			ips[s][family.OfString(ip.IP)] = ip.IP
		}
		if !podCIDR(i).Contains(net.ParseIP(ips[s][family.IPv4])) || !podCIDR6(i).Contains(net.ParseIP(ips[s][family.IPv6])) {
			t.Fatalf("%s on node %d has podIPs %v, want one of %s and one of %s", s, i, p.Status.PodIPs, podCIDR(i), podCIDR6(i))
		}
	}
	// CoreDNS answers the Service's AAAA record with its IPv6 ClusterIP.
	dnsServer := net.JoinHostPort(st.Facts[FactDNS], "53")
	aaaa, err := Query(ctx, st.Nodes[0].NS, dnsServer, "srv2.dual-test.svc."+ClusterDomain+".", dnsmessage.TypeAAAA)
	if err != nil || !slices.ContainsFunc(aaaa, net.ParseIP(svc.Spec.ClusterIPs[1]).Equal) {
		t.Errorf("AAAA srv2.dual-test: %v (%v), want %s", aaaa, err, svc.Spec.ClusterIPs[1])
	}
	for _, vip := range svc.Spec.ClusterIPs {
		waitDial(ctx, t, st.Nodes[0].NS, net.JoinHostPort(vip, "7001"))
	}
	clients := map[string][2]string{}
	for i, f := range []family.Family{family.IPv4, family.IPv6} {
		for c, to := range map[string][2]string{
			"same-node-podip":  {n1, ips["srv1"][f]},
			"cross-node-podip": {n1, ips["srv2"][f]},
			"cross-clusterip":  {n1, svc.Spec.ClusterIPs[i]},
			"same-clusterip":   {n2, svc.Spec.ClusterIPs[i]},
		} {
			clients[string(f)+"-"+c] = to
		}
	}
	runClients(ctx, t, cs, ns.Name, st.Facts[FactImage], clients)
	kubeRunDual(t, name)
}

// kubeRunDual: `kube run --ip-family dual` on cluster k gives an IPv4 and
// an IPv6 cell per path, each with valid samples, having dialed an address
// of its family in the cluster's ranges.
func kubeRunDual(t *testing.T, k string) {
	out := filepath.Join(t.TempDir(), "dual.json")
	log, err := vnetlab(t, 5*time.Minute, "kube", "run", "--cluster", k, "--ip-family", "dual", "--paths", "pod,service",
		"--placements", "cross-node", "--tests", "tcp_rr", "--repeat", "1", "--duration", "1s", "-o", out)
	if err != nil {
		t.Fatalf("kube run --ip-family dual: %v\n%s", err, log)
	}
	f, err := results.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	ranges := map[string][]*net.IPNet{
		"pod":     {clusterCIDR, clusterCIDR6},
		"service": {mustCIDR(serviceCIDR), mustCIDR(serviceCIDR6)},
	}
	var got []string
	for _, c := range f.Cells {
		id := c.ID().String()
		got = append(got, id)
		fam := family.OfCell(c.Family)
		want := ranges[c.Path][0]
		if fam == family.IPv6 {
			want = ranges[c.Path][1]
		}
		if ip := net.ParseIP(c.Addr); ip == nil || family.OfString(c.Addr) != fam || !want.Contains(ip) {
			t.Errorf("%s dialed %q, want an %s address of %s", id, c.Addr, fam, want)
		}
		if c.Valid != 1 || c.Median <= 0 {
			t.Errorf("%s: %d valid samples, median %g", id, c.Valid, c.Median)
		}
	}
	if len(f.Cells) != 4 || strings.Count(strings.Join(got, " "), "/ipv6/") != 2 {
		t.Errorf("cells %v: want pod and service, each ipv4 and ipv6", got)
	}
}

// On a single-stack (IPv4) cluster, `kube run --ip-family ipv6` fails
// with one line naming what the cluster lacks.
func TestKubeRunFamilyMissing(t *testing.T) {
	needCluster(t)
	log, err := vnetlab(t, 3*time.Minute, "kube", "run", "--cluster", testCluster, "--ip-family", "ipv6", "--paths", "pod",
		"--placements", "same-node", "--tests", "tcp_rr", "--repeat", "1", "--duration", "1s")
	if err == nil || !strings.Contains(log, "has no ipv6 address") || !strings.Contains(log, "--ip-family dual") {
		t.Errorf("kube run --ip-family ipv6 on an IPv4 cluster: want an error naming the missing IPv6 addresses, got %v:\n%s", err, log)
	}
}

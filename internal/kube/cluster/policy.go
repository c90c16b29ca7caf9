package cluster

// A cluster's NetworkPolicy enforcer (kube up --network-policy): vnetlab's
// controller (`vnetlab kube-netpol`, internal/kube/netpolicy) as a process
// of every node, beside its Service proxy, as the cluster runs its other
// node daemons; kube-router's as a DaemonSet (kuberouter.go); Cilium's
// agent's own (cilium.go); or none.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/polbpf"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
	"github.com/vnetlab/vnetlab/internal/kube/netpolicy"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// networkPolicy is the spec's enforcer: the one asked for, else Cilium's
// own with its CNI (as Cilium installs), else vnetlab's with vnetlab's CNI
// in a mode it serves, else none.
func (s Spec) networkPolicy() string {
	if s.NetworkPolicy != "" {
		return s.NetworkPolicy
	}
	if s.CNI == clusternet.CNICilium {
		return clusternet.PolicyCilium
	}
	if s.CNI == clusternet.CNIVnetlab && (s.nodeFilterUnseen() == "" || (s.podIfPolicy() && s.podIfUnserved() == "")) {
		return clusternet.PolicyVnetlab
	}
	return clusternet.PolicyNone
}

// podIfPolicy: vnetlab's CNI wires the pods in a mode whose packets the
// node's netfilter misses and policy programs on the pods' own interfaces
// see (veth-ebpf): vnetlab's controller enforces there with its eBPF
// backend (internal/kube/netpolicy: ebpf.go).
func (s Spec) podIfPolicy() bool { return podIfPolicy(s.CNI, s.cniMode()) }

// podIfPolicy: CNI cni in mode mode wires pods whose packets the node's
// netfilter misses and the pods' own interfaces' programs see.
func podIfPolicy(cni, mode string) bool {
	if cni != clusternet.CNIVnetlab {
		return false
	}
	m, err := modes.Get(mode)
	return err == nil && m.NodeFilterUnseen(nil) != "" && m.Policies.PodIf
}

// PolicyLabProvider is the lab policy provider with the data path of local
// cluster st's enforcer on its CNI (results.Cluster.PolicyLabProvider: a
// lab's policy cells are paired with the cluster's by it); "" when the
// cluster enforces none.
func PolicyLabProvider(st *lab.State) string {
	n := Network(st)
	e, err := clusternet.GetEnforcer(n.Policy)
	if err != nil || !e.Enforces {
		return ""
	}
	return e.LabProviderFor(podIfPolicy(n.CNI, n.CNIMode))
}

// podIfUnserved says why the spec's Services defeat the pods' policy
// programs ("": they do not): the programs decide a pod's egress at its
// eth0, which a Service's packet leaves with its clusterIP when the node's
// netfilter translates it; vnetlab's eBPF proxy translates where the
// programs know it (its frontends, or the socket).
func (s Spec) podIfUnserved() string {
	if clusternet.IsVnetlab(s.Proxy) {
		return ""
	}
	return fmt.Sprintf("its programs decide a pod's egress at the pod's eth0, before {proxy} %s translates a Service in the node's netfilter (they would judge the clusterIP, not the backend): use {proxy} %s",
		s.Proxy, strings.Join(clusternet.VnetlabProxyNames(), "|"))
}

// nodeFilterUnseen says why rules in a node's netfilter would not see the
// pods' packets with the spec's CNI ("": they see them). Debian's bridge
// plugin and flannel put the pods on the node's bridge cni0, whose packets
// the node's netfilter sees (wire.go sets bridge-nf-call-iptables, and
// ip6tables, in every node); vnetlab's CNI asks its mode.
func (s Spec) nodeFilterUnseen() string {
	if s.CNI != clusternet.CNIVnetlab {
		return ""
	}
	m, err := modes.Get(s.cniMode())
	if err != nil {
		return "" // validateCNI says what is wrong
	}
	// The cluster's CNI configuration gives its modes no options.
	return m.NodeFilterUnseen(nil)
}

// validatePolicy checks --network-policy against the CNI it must see the
// packets of.
func (s Spec) validatePolicy() error {
	e, err := clusternet.GetEnforcer(s.networkPolicy())
	if err != nil {
		return field.Errorf("network_policy", "{network_policy} %q: %s", s.NetworkPolicy, clusternet.EnforcerHelp())
	}
	if cni := s.Network().CNI; !e.Serves(cni) {
		return field.Errorf("network_policy", "{network_policy} %s is %s's own: add {cni} %s (the cluster's CNI is %s)", e.Name, e.CNI, e.CNI, cni)
	}
	if e.PodIf && s.podIfPolicy() {
		if why := s.podIfUnserved(); why != "" {
			return field.Errorf("network_policy", "{network_policy} %s with {cni_mode} %s: %s", e.Name, s.cniMode(), why)
		}
		return nil
	}
	if why := s.nodeFilterUnseen(); e.NodeFilter && why != "" {
		return field.Errorf("network_policy", "{network_policy} %s with {cni} %s {cni_mode} %s: its rules sit in the node's netfilter and %s: use {cni_mode} %s, or {network_policy} %s",
			e.Name, s.CNI, s.cniMode(), why, strings.Join(policyModes(), "|"), clusternet.PolicyNone)
	}
	return nil
}

// policyModes lists the modes of vnetlab's CNI whose pods' packets the
// node's netfilter sees.
func policyModes() []string {
	return modes.NamesWhere(func(m modes.Mode) bool { return m.Attach != nil && m.NodeFilterUnseen(nil) == "" })
}

// policyProcess names the node's policy process for kube up's lines ("":
// none runs as a node process).
func (s Spec) policyProcess() string {
	if e, err := clusternet.GetEnforcer(s.networkPolicy()); err == nil && e.Vnetlab {
		return ", vnetlab kube-netpol"
	}
	return ""
}

// startNodePolicy starts vnetlab's policy controller on node n, when it is
// the cluster's enforcer: a process of the node (its namespace), beside its
// Service proxy, as the node's other daemons run.
func (b *builder) startNodePolicy(n node, kubeconfig string) error {
	if e, _ := clusternet.GetEnforcer(b.spec.networkPolicy()); !e.Vnetlab {
		return nil
	}
	args := []string{"kube-netpol", "--kubeconfig", kubeconfig, "--node", n.name}
	if b.spec.podIfPolicy() {
		// The node's policy plane sits in its eBPF plane's pin directory,
		// which the cluster's journal holds (writeVnetlabCNI): kube down
		// removes it with the node's other pins.
		args = append(args, "--plane", ProxyPlane(b.spec.Name, n.name), "--containerd-state", containerdState(n))
	}
	return b.daemon(n.ns, n.name+"-vnetlab-netpol", b.self, args...)
}

// waitPolicy waits until the cluster's enforcer is in force on every node:
// vnetlab's table, or kube-router's firewall chain.
func (b *builder) waitPolicy(ctx context.Context) error {
	e, _ := clusternet.GetEnforcer(b.spec.networkPolicy())
	if !e.Vnetlab {
		return nil
	}
	b.say("waiting for vnetlab's policy controller on %d nodes", len(b.nodes))
	for _, n := range b.nodes {
		if b.spec.podIfPolicy() {
			dir := netpolicy.PlaneDir(ProxyPlane(b.spec.Name, n.name))
			if err := waitFor(ctx, time.Minute, "policy maps in "+dir+" (see "+b.logPath(n.name+"-vnetlab-netpol")+")", func() bool { return polbpf.Exists(dir) }); err != nil {
				return err
			}
			continue
		}
		var last string
		err := waitFor(ctx, time.Minute, "table inet "+polnft.Table+" in node "+n.name+" (see "+b.logPath(n.name+"-vnetlab-netpol")+")", func() bool {
			out, err := proc.Command(ctx, n.ns, "nft", "list", "table", "inet", polnft.Table).CombinedOutput()
			last = strings.TrimSpace(string(out))
			return err == nil
		})
		if err != nil {
			return fmt.Errorf("%w: %s", err, last)
		}
	}
	return nil
}

package labpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// kube-router's rules for a world: not a provider of the lab's, but the
// peer's own enforcer, for tests that hold it beside the model and vnetlab's
// providers. kube-router's NetworkPolicy controller itself (the release
// the clusters run, binaries.KubeRouterVersion) syncs once on the world,
// served as Kubernetes objects by a fake clientset, in the namespace given
// (binaries.KubeRouterRules, kuberouterrules_main.go.txt). It writes what
// it writes on a node: FORWARD, INPUT and OUTPUT jump to KUBE-ROUTER-*,
// which send every packet from or to a pod of the node to that pod's
// KUBE-POD-FW-* chain (by its address: -s/-d, and the same behind
// `physdev --physdev-is-bridged` for a bridge), which runs it through the
// KUBE-NWPLCY-* chain of each policy selecting the pod (ipsets KUBE-SRC-*
// and KUBE-DST-* of the peers and the selected pods) and REJECTs what none
// marks.

// KubeRouterNode is the Node a world's pods run on, the namespace's.
const KubeRouterNode = "node"

// KubeRouterNodeIPs are that node's addresses, one per family: kube-router
// enforces the families of its node's addresses, and takes a pod for its
// own when the pod's hostIP is one of them. They are stand-ins: kube-router
// writes them in no rule.
var KubeRouterNodeIPs = map[family.Family]netip.Addr{family.IPv4: netip.MustParseAddr("192.0.2.1"), family.IPv6: netip.MustParseAddr("2001:db8:ffff::1")}

// ErrKubeRouterSync is kube-router's own sync failing: it logged an error
// and stopped where it was, as on a node, leaving what it had written
// (KubeRouterRules' error wraps it and quotes kube-router's first error).
// A differential counts such a world as one kube-router cannot enforce,
// apart from a probe it decides otherwise than the model.
var ErrKubeRouterSync = errors.New("kube-router's sync failed")

// kubeRouterTools are the programs kube-router runs, with their Debian
// packages.
var kubeRouterTools = [][2]string{{"ipset", "ipset"}, {"iptables", "iptables"}, {"iptables-save", "iptables"},
	{"iptables-restore", "iptables"}, {"ip6tables", "iptables"}, {"ip6tables-save", "iptables"}, {"ip6tables-restore", "iptables"}}

// KubeRouterRules makes kube-router's NetworkPolicy controller sync once on
// world w in network namespace ns, for the families of fam (a node with an
// address of each), and leaves its iptables rules and ipsets there: w's
// pods all run on one node, the namespace's (KubeRouterNode), so each has
// its chain. A later call replaces them, as kube-router's next sync would,
// when it is for the same families: give a namespace one fam throughout (a
// node's families never change; kube-router's IPv6 sync after an IPv4 one
// takes the IPv4 sets for its own stale ones, fails to destroy them and
// fails). ns is a namespace of the caller's, never "" (the program refuses
// the root namespace as well). The program is built on first use and
// cached (say tells of the build and its time); a build that cannot be
// made, or a tool kube-router needs that is not installed, is a one-line
// error. When kube-router's own sync fails the error wraps
// ErrKubeRouterSync.
func KubeRouterRules(ctx context.Context, ns string, w *netpol.World, fam family.Family, say func(string, ...any)) error {
	if ns == "" {
		return errors.New("kube-router's rules need a network namespace of their own: none given")
	}
	if err := needTools("kube-router's NetworkPolicy controller", kubeRouterTools); err != nil {
		return err
	}
	world, err := KubeRouterWorld(w, fam)
	if err != nil {
		return err
	}
	bin, err := binaries.EnsureKubeRouterRules(ctx, say)
	if err != nil {
		return err
	}
	c := proc.Command(ctx, ns, bin, "-f", "-")
	var stderr bytes.Buffer
	c.Stdin, c.Stderr = bytes.NewReader(world), &stderr
	if err := c.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == kubeRouterSyncFailed {
			said := strings.TrimPrefix(lastLine(stderr.String()), binaries.KubeRouterRules+": "+ErrKubeRouterSync.Error()+": ")
			return fmt.Errorf("%w in %s: %s", ErrKubeRouterSync, ns, said)
		}
		return fmt.Errorf("kube-router's rules in %s: %v: %s", ns, err, lastLine(stderr.String()))
	}
	return nil
}

// kubeRouterSyncFailed is the program's exit status when kube-router's
// sync logged an error.
const kubeRouterSyncFailed = 2

// lastLine is what a program said last: the program's own error follows
// kube-router's log.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// KubeRouterWorld is world w as the Kubernetes List kube-router's rules
// program reads (JSON, as `kubectl get -o json` prints a List): the Node
// (KubeRouterNode, with the KubeRouterNodeIPs of fam's families as its
// InternalIPs), every
// namespace of the world with its labels (kubernetes.io/metadata.name as
// the API server adds it; a namespace a pod or policy names and the world
// does not list has that label alone), every pod running on the node with
// its labels, named container ports, status.podIPs and status.hostIP, and
// the policies.
func KubeRouterWorld(w *netpol.World, fam family.Family) ([]byte, error) {
	node := &corev1.Node{TypeMeta: typeMeta("Node", corev1.SchemeGroupVersion.String()),
		ObjectMeta: metav1.ObjectMeta{Name: KubeRouterNode}}
	var hostIPs []corev1.HostIP
	for _, f := range fam.Measured() {
		a := KubeRouterNodeIPs[f]
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.String()})
		hostIPs = append(hostIPs, corev1.HostIP{IP: a.String()})
	}
	objs := []runtime.Object{node}
	var names []string
	for _, ns := range w.Namespaces {
		names = append(names, ns.Name)
	}
	for _, p := range w.Pods {
		names = append(names, namespaceOr(p.Namespace))
	}
	for _, p := range w.Policies {
		names = append(names, namespaceOr(p.Namespace))
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		objs = append(objs, &corev1.Namespace{TypeMeta: typeMeta("Namespace", corev1.SchemeGroupVersion.String()),
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: w.NamespaceLabels(name)}})
	}
	for _, p := range w.Pods {
		objs = append(objs, kubeRouterPod(p, hostIPs))
	}
	for _, p := range w.Policies {
		p := p.DeepCopy()
		p.TypeMeta = typeMeta(netpol.KindNetworkPolicy, networkingv1.SchemeGroupVersion.String())
		p.Namespace = namespaceOr(p.Namespace)
		objs = append(objs, p)
	}
	list := corev1.List{TypeMeta: typeMeta("List", corev1.SchemeGroupVersion.String())}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, runtime.RawExtension{Raw: raw})
	}
	return json.Marshal(list)
}

// kubeRouterPod is pod p running on the node: its labels, one container
// holding its named ports, and its addresses.
func kubeRouterPod(p netpol.Pod, hostIPs []corev1.HostIP) *corev1.Pod {
	pod := &corev1.Pod{TypeMeta: typeMeta("Pod", corev1.SchemeGroupVersion.String()),
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: namespaceOr(p.Namespace), Labels: p.Labels},
		Spec:       corev1.PodSpec{NodeName: KubeRouterNode, Containers: []corev1.Container{{Name: "c", Image: "none"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, HostIP: hostIPs[0].IP, HostIPs: hostIPs}}
	for _, np := range p.Ports {
		pod.Spec.Containers[0].Ports = append(pod.Spec.Containers[0].Ports, corev1.ContainerPort{
			Name: np.Name, Protocol: corev1.Protocol(np.Proto), ContainerPort: int32(np.Port)})
	}
	for _, a := range p.IPs {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: a.String()})
	}
	if len(p.IPs) > 0 {
		pod.Status.PodIP = p.IPs[0].String()
	}
	return pod
}

func typeMeta(kind, apiVersion string) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kind, APIVersion: apiVersion}
}

// namespaceOr is namespace ns, DefaultNamespace when unset.
func namespaceOr(ns string) string {
	if ns == "" {
		return netpol.DefaultNamespace
	}
	return ns
}

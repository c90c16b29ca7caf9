package cluster

// kube-router's network policy controller as users run it beside another
// CNI (kube up --network-policy kube-router): kube-router, built from its Go
// module (internal/kube/binaries), runs on every node as a DaemonSet from an
// image vnetlab builds, with only its firewall on (--run-firewall, no
// router, no service proxy). It writes iptables chains (KUBE-ROUTER-INPUT,
// -FORWARD, -OUTPUT and a chain per pod and policy) and ipsets in the node's
// namespace (hostNetwork), which go with the namespace at teardown.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

const (
	kubeRouterName = "kube-router"
	// kubeRouterPath is where its image keeps kube-router.
	kubeRouterPath = "/usr/local/bin/kube-router"
	// kubeRouterChain is the chain its firewall hooks into FORWARD: present
	// in a node once the controller has synced there.
	kubeRouterChain = "KUBE-ROUTER-FORWARD"
	// ipsetPath is Debian's ipset, which kube-router runs by name.
	ipsetPath = "/usr/sbin/ipset"
)

// kubeRouterImage builds kube-router (first time only) and its image
// archive, kept beside the binary.
func kubeRouterImage(ctx context.Context, say func(string, ...any)) (ref, tarPath string, err error) {
	return builtImage(ctx, say, binaries.EnsureKubeRouter, "vnetlab.local/kube-router:"+binaries.KubeRouterBuild(), kubeRouterContent)
}

// kubeRouterContent is kube-router's image: kube-router (bin), the
// machine's iptables and ipset with what they load.
func kubeRouterContent(ref, bin string) (*image.Image, error) {
	c := image.Content{Files: map[string]string{kubeRouterPath: bin, "/usr/bin/ipset": ipsetPath}, Links: map[string]string{},
		Entrypoint: []string{kubeRouterPath}}
	progs, err := addIPTables(&c, kubeRouterName)
	if err != nil {
		return nil, err
	}
	c.AddLibraries(append(progs, "/usr/bin/ipset")...)
	img, _, err := image.Assemble(c)
	if err != nil {
		return nil, err
	}
	img.Ref = ref
	return img, nil
}

// kubeRouterArgs are the controller's flags: its firewall alone, the
// cluster's Service ranges and families, no metrics server.
func (b *builder) kubeRouterArgs() []string {
	fam := b.addrs.fam
	return []string{"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--run-loadbalancer=false",
		"--service-cluster-ip-range=" + b.addrs.serviceCIDRs(),
		"--enable-ipv4=" + strconv.FormatBool(fam.HasIPv4()), "--enable-ipv6=" + strconv.FormatBool(fam.HasIPv6()),
		"--metrics-port=0", "--v=1"}
}

// createKubeRouter creates kube-router's objects as its "firewall only"
// manifest does: a ServiceAccount with the rights its informers need (it
// lists Services, Endpoints and EndpointSlices too, and waits for them) and
// the DaemonSet.
func createKubeRouter(ctx context.Context, cs kubernetes.Interface, ref string, args []string) error {
	const ns = metav1.NamespaceSystem
	labels := map[string]string{"k8s-app": kubeRouterName}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: kubeRouterName, Namespace: ns}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: kubeRouterName}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "pods", "services", "nodes", "endpoints"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: kubeRouterName},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: kubeRouterName, Namespace: ns}}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: kubeRouterName, Namespace: ns, Labels: labels},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: kubeRouterPod(ref, args)}}}
	return createAll(kubeRouterName,
		create(ctx, "ServiceAccount", cs.CoreV1().ServiceAccounts(ns), sa),
		create(ctx, "ClusterRole", cs.RbacV1().ClusterRoles(), role),
		create(ctx, "ClusterRoleBinding", cs.RbacV1().ClusterRoleBindings(), binding),
		create(ctx, "DaemonSet", cs.AppsV1().DaemonSets(ns), ds))
}

// kubeRouterPod is the controller's pod: the node's network (hostNetwork:
// its rules go into the node's namespace), NET_ADMIN and NET_RAW (not
// privileged: this VM refuses privileged pods), its node's name.
func kubeRouterPod(ref string, args []string) corev1.PodSpec {
	no := false
	return corev1.PodSpec{
		ServiceAccountName:            kubeRouterName,
		PriorityClassName:             "system-node-critical",
		HostNetwork:                   true,
		Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		TerminationGracePeriodSeconds: new(int64(5)),
		Containers: []corev1.Container{{
			Name: kubeRouterName, Image: ref, ImagePullPolicy: corev1.PullNever,
			Command: []string{kubeRouterPath}, Args: args,
			Env: []corev1.EnvVar{
				{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				// The API server directly, not through the kubernetes
				// Service (as flanneld: no wait for the node's proxy).
				{Name: "KUBERNETES_SERVICE_HOST", Value: apiIP.String()},
				{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(apiPort)},
			},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi")}},
			SecurityContext: &corev1.SecurityContext{Privileged: &no,
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}},
		}},
	}
}

// startKubeRouter creates kube-router's DaemonSet and waits until its
// firewall chain is in every node's namespace.
func (b *builder) startKubeRouter(ctx context.Context, cs kubernetes.Interface) error {
	if err := createKubeRouter(ctx, cs, b.kubeRouterRef, b.kubeRouterArgs()); err != nil {
		return err
	}
	b.say("waiting for kube-router's firewall on %d nodes", len(b.nodes))
	for _, n := range b.nodes {
		var last string
		err := waitFor(ctx, 2*time.Minute, "kube-router's chain "+kubeRouterChain+" in node "+n.name+" (kubectl -n kube-system logs ds/kube-router)", func() bool {
			out, err := proc.Command(ctx, n.ns, "iptables", "-w", "-S", kubeRouterChain).CombinedOutput()
			last = strings.TrimSpace(string(out))
			return err == nil
		})
		if err != nil {
			return fmt.Errorf("%w: %s", err, last)
		}
	}
	return nil
}

// Package measure runs vnetlab's engines between pods of a Kubernetes
// cluster: its own labelled namespace, server and client pods pinned to
// nodes, a ClusterIP Service per server, a hostNetwork pair as the
// node-to-node baseline; commands run in the pods through the API's exec.
package measure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Label marks every namespace vnetlab creates in a cluster (`kube clean`
// deletes those left by a killed run).
const (
	LabelKey   = "app.kubernetes.io/managed-by"
	LabelValue = "vnetlab"
)

// Paths and placements.
const (
	PathPod     = "pod"
	PathService = "service"
	PathHost    = "host"
	SameNode    = "same-node"
	CrossNode   = "cross-node"
)

// Bounded waits: each failure is reported within these.
const (
	apiTimeout   = 10 * time.Second
	readyTimeout = 2 * time.Minute
)

// Connect builds a client from a kubeconfig (and context; "" = current) and
// checks the API server answers.
func Connect(ctx context.Context, kubeconfig, kubeContext string) (*kubernetes.Clientset, *rest.Config, string, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}
	if kubeconfig == "" {
		rules = clientcmd.NewDefaultClientConfigLoadingRules()
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, "", fmt.Errorf("kubeconfig %s: %v: give a readable kubeconfig with --kubeconfig (and --context)", kubeconfig, err)
	}
	cfg.Timeout = 0 // exec streams last a whole sample; each call has its own deadline
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	vctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	v, err := versionOf(vctx, cs)
	if err != nil {
		return nil, nil, "", fmt.Errorf("cannot reach the API server at %s (%v): check --kubeconfig/--context and that the cluster is up", cfg.Host, err)
	}
	return cs, cfg, v, nil
}

func versionOf(ctx context.Context, cs *kubernetes.Clientset) (string, error) {
	b, err := cs.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	if err != nil {
		return "", err
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

// Permissions a run needs, checked before anything is created.
var permissions = []authv1.ResourceAttributes{
	{Verb: "create", Resource: "namespaces"},
	{Verb: "delete", Resource: "namespaces"},
	{Verb: "list", Resource: "nodes"},
	{Verb: "create", Resource: "pods"},
	{Verb: "create", Resource: "pods", Subresource: "exec"},
	{Verb: "create", Resource: "services"},
}

// CheckRBAC names the first permission the caller lacks.
func CheckRBAC(ctx context.Context, cs kubernetes.Interface) error {
	for _, p := range permissions {
		p := p
		rev := &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &p}}
		rctx, cancel := context.WithTimeout(ctx, apiTimeout)
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(rctx, rev, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("checking permissions: %v", err)
		}
		if !got.Status.Allowed {
			what := p.Resource
			if p.Subresource != "" {
				what += "/" + p.Subresource
			}
			return fmt.Errorf("missing RBAC permission: %s %s: bind a role that allows it (e.g. cluster-admin) to this kubeconfig's user", p.Verb, what)
		}
	}
	return nil
}

// PickNodes returns the client and server nodes: the named ones, or the
// first two Ready schedulable nodes by name. cross says whether two are needed.
func PickNodes(ctx context.Context, cs kubernetes.Interface, named []string, cross bool) ([]corev1.Node, error) {
	lctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := cs.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %v", err)
	}
	ready := map[string]corev1.Node{}
	var names []string
	for _, n := range list.Items {
		if isReady(n) && !n.Spec.Unschedulable {
			ready[n.Name] = n
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("no Ready schedulable node in the cluster (%d nodes): wait for the nodes to be Ready (kubectl get nodes)", len(list.Items))
	}
	var out []corev1.Node
	if len(named) > 0 {
		for _, n := range named {
			node, ok := ready[n]
			if !ok {
				return nil, fmt.Errorf("--nodes: %s is not a Ready schedulable node (Ready: %s)", n, strings.Join(names, ", "))
			}
			out = append(out, node)
		}
	} else {
		for _, n := range names {
			out = append(out, ready[n])
			if len(out) == 2 {
				break
			}
		}
	}
	if cross && (len(out) < 2 || out[0].Name == out[1].Name) {
		return nil, fmt.Errorf("cross-node needs two Ready schedulable nodes and the cluster has %d (%s): use --placements same-node", len(names), strings.Join(names, ", "))
	}
	return out, nil
}

func isReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// CreateNamespace makes the run's labelled namespace.
func CreateNamespace(ctx context.Context, cs kubernetes.Interface) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "vnetlab-", Labels: map[string]string{LabelKey: LabelValue}}}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	got, err := cs.CoreV1().Namespaces().Create(cctx, ns, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create namespace: %v", err)
	}
	// Pods are refused until the controller-manager gives the namespace its
	// default ServiceAccount.
	deadline := time.Now().Add(readyTimeout)
	for {
		_, err := cs.CoreV1().ServiceAccounts(got.Name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return got.Name, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			DeleteNamespace(cs, got.Name)
			return "", fmt.Errorf("namespace %s has no default ServiceAccount after %s (%v): is the cluster's controller-manager running?", got.Name, readyTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// DeleteNamespace deletes a run's namespace without waiting for its pods to
// stop gracefully (grace period 0), even after ctx was cancelled.
func DeleteNamespace(cs kubernetes.Interface, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	zero := int64(0)
	_ = cs.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Clean deletes every namespace carrying vnetlab's label (left by a killed run).
func Clean(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	lctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := cs.CoreV1().Namespaces().List(lctx, metav1.ListOptions{LabelSelector: LabelKey + "=" + LabelValue})
	if err != nil {
		return nil, err
	}
	var out []string
	var errs []string
	for _, n := range list.Items {
		if n.Status.Phase == corev1.NamespaceTerminating {
			continue
		}
		if err := DeleteNamespace(cs, n.Name); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		out = append(out, n.Name)
	}
	if len(errs) > 0 {
		return out, errors.New(strings.Join(errs, "; "))
	}
	return out, nil
}

// Ports the engines listen on (iperf3, rr, sockperf), each TCP and UDP.
var enginePorts = []int32{5201, 7001, 11111}

// PodSpec is one measuring pod.
type PodSpec struct {
	Name, Node  string
	HostNetwork bool
	Server      bool // selected by its Service
}

// CreatePod makes an idle measuring pod pinned to its node.
func CreatePod(ctx context.Context, cs kubernetes.Interface, ns, image string, pull corev1.PullPolicy, p PodSpec) error {
	labels := map[string]string{LabelKey: LabelValue, "vnetlab.pod": p.Name}
	zero := int64(0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: p.Node, HostNetwork: p.HostNetwork, TerminationGracePeriodSeconds: &zero,
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "vnetlab", Image: image, ImagePullPolicy: pull}}}}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if _, err := cs.CoreV1().Pods(ns).Create(cctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %v", p.Name, err)
	}
	return nil
}

// CreateService makes a ClusterIP Service in front of one pod and returns its IP.
func CreateService(ctx context.Context, cs kubernetes.Interface, ns, pod string) (string, error) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: pod, Labels: map[string]string{LabelKey: LabelValue}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"vnetlab.pod": pod}}}
	for _, port := range enginePorts {
		for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP} {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("%s-%d", strings.ToLower(string(proto)), port),
				Protocol: proto, Port: port, TargetPort: intstr.FromInt32(port)})
		}
	}
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	got, err := cs.CoreV1().Services(ns).Create(cctx, svc, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create service %s: %v", pod, err)
	}
	return got.Spec.ClusterIP, nil
}

// WaitRunning waits until every pod runs, and fails early with the reason a
// pod cannot start (an image the node cannot get, a crash).
func WaitRunning(ctx context.Context, cs kubernetes.Interface, ns string, names []string, image string) (map[string]*corev1.Pod, error) {
	deadline := time.Now().Add(readyTimeout)
	for {
		out := map[string]*corev1.Pod{}
		lctx, cancel := context.WithTimeout(ctx, apiTimeout)
		list, err := cs.CoreV1().Pods(ns).List(lctx, metav1.ListOptions{})
		cancel()
		if err == nil {
			for i := range list.Items {
				p := &list.Items[i]
				if err := podFailure(p, image); err != nil {
					return nil, err
				}
				if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
					out[p.Name] = p
				}
			}
			if len(out) == len(names) {
				return out, nil
			}
		}
		if time.Now().After(deadline) {
			var waiting []string
			for _, n := range names {
				if out[n] == nil {
					waiting = append(waiting, n)
				}
			}
			return nil, fmt.Errorf("pods %s not running after %s: see `kubectl -n %s describe pods`", strings.Join(waiting, ", "), readyTimeout, ns)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// podFailure is the reason a pod will not start, or nil while it may.
func podFailure(p *corev1.Pod, image string) error {
	for _, c := range p.Status.ContainerStatuses {
		w := c.State.Waiting
		if w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
				return fmt.Errorf("node %s cannot get image %s (%s): load it into every node (`vnetlab kube image -o vnetlab.tar`, then `vnetlab kube load CLUSTER vnetlab.tar` or `kind load image-archive vnetlab.tar`), or push it to a registry and pass --image", p.Spec.NodeName, image, w.Reason)
			case "CrashLoopBackOff", "CreateContainerError", "CreateContainerConfigError":
				return fmt.Errorf("pod %s on %s cannot start (%s: %s)", p.Name, p.Spec.NodeName, w.Reason, w.Message)
			}
		}
		if t := c.State.Terminated; t != nil {
			return fmt.Errorf("pod %s on %s exited (%s, code %d): the image's entrypoint must stay up (vnetlab kube pause)", p.Name, p.Spec.NodeName, t.Reason, t.ExitCode)
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		return fmt.Errorf("pod %s failed: %s", p.Name, p.Status.Message)
	}
	return nil
}

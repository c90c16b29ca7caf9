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

	"github.com/vnetlab/vnetlab/internal/vocab/family"
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

// Bounded waits: each failure is reported within these (and the pods'
// Options.ReadyTimeout).
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

// ConnectChecked is Connect, then checkRBAC: a client that may make what
// a measuring run makes.
func ConnectChecked(ctx context.Context, kubeconfig, kubeContext string) (*kubernetes.Clientset, *rest.Config, string, error) {
	cs, cfg, version, err := Connect(ctx, kubeconfig, kubeContext)
	if err != nil {
		return nil, nil, "", err
	}
	if err := checkRBAC(ctx, cs); err != nil {
		return nil, nil, "", err
	}
	return cs, cfg, version, nil
}

// checkRBAC names the first permission the caller lacks.
func checkRBAC(ctx context.Context, cs kubernetes.Interface) error {
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

// ReadyNodes are the cluster's Ready schedulable nodes, sorted by name.
func ReadyNodes(ctx context.Context, cs kubernetes.Interface) ([]corev1.Node, error) {
	lctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := cs.CoreV1().Nodes().List(lctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %v", err)
	}
	var out []corev1.Node
	for _, n := range list.Items {
		if isReady(n) && !n.Spec.Unschedulable {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil, fmt.Errorf("no Ready schedulable node in the cluster (%d nodes): wait for the nodes to be Ready (kubectl get nodes)", len(list.Items))
	}
	return out, nil
}

// PickNodes returns the client and server nodes: the named ones, or the
// first two Ready schedulable nodes by name. cross says whether two are needed.
func PickNodes(ctx context.Context, cs kubernetes.Interface, named []string, cross bool) ([]corev1.Node, error) {
	nodes, err := ReadyNodes(ctx, cs)
	if err != nil {
		return nil, err
	}
	ready := map[string]corev1.Node{}
	var names []string
	for _, n := range nodes {
		ready[n.Name] = n
		names = append(names, n.Name)
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
	if cross && len(named) > 0 && (len(out) < 2 || out[0].Name == out[1].Name) {
		return nil, fmt.Errorf("cross-node needs two different nodes and --nodes names only %s: name two of %s, or use --placements same-node", out[0].Name, strings.Join(names, ", "))
	}
	if cross && len(out) < 2 {
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
	// Command is the container's command; none: the image's entrypoint
	// (idle until stopped).
	Command []string
}

// CreatePod makes an idle measuring pod pinned to its node.
func CreatePod(ctx context.Context, cs kubernetes.Interface, ns, image string, pull corev1.PullPolicy, p PodSpec) error {
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if _, err := cs.CoreV1().Pods(ns).Create(cctx, Pod(image, pull, p), metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %v", p.Name, err)
	}
	return nil
}

// Pod is the measuring pod p: its node named, never restarted, stopped
// without a grace period.
func Pod(image string, pull corev1.PullPolicy, p PodSpec) *corev1.Pod {
	labels := map[string]string{LabelKey: LabelValue, "vnetlab.pod": p.Name}
	zero := int64(0)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: p.Node, HostNetwork: p.HostNetwork, TerminationGracePeriodSeconds: &zero,
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "vnetlab", Image: image, ImagePullPolicy: pull, Command: p.Command}}}}
}

// CreateService makes a ClusterIP Service in front of one pod and returns
// its ClusterIPs: with a family that has IPv6, of every family the cluster
// has (PreferDualStack).
func CreateService(ctx context.Context, cs kubernetes.Interface, ns, pod string, f family.Family) ([]string, error) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: pod, Labels: map[string]string{LabelKey: LabelValue}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"vnetlab.pod": pod}}}
	if f.HasIPv6() {
		policy := corev1.IPFamilyPolicyPreferDualStack
		svc.Spec.IPFamilyPolicy = &policy
	}
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
		return nil, fmt.Errorf("create service %s: %v", pod, err)
	}
	if len(got.Spec.ClusterIPs) == 0 {
		return []string{got.Spec.ClusterIP}, nil
	}
	return got.Spec.ClusterIPs, nil
}

// DefaultReadyTimeout bounds the wait for the measuring pods to be Ready.
const DefaultReadyTimeout = 2 * time.Minute

// WaitReady waits until every pod is Ready with an IP, and fails early with
// the reason a pod cannot start (an image the node cannot get, an exit).
// After timeout it names the first pod still not Ready, its phase, its
// container's state and the namespace's last warning about it.
func WaitReady(ctx context.Context, cs kubernetes.Interface, ns string, names []string, image string, timeout time.Duration) (map[string]*corev1.Pod, error) {
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		out := map[string]*corev1.Pod{}
		all := map[string]*corev1.Pod{}
		lctx, cancel := context.WithTimeout(ctx, apiTimeout)
		list, err := cs.CoreV1().Pods(ns).List(lctx, metav1.ListOptions{})
		cancel()
		if err == nil {
			for i := range list.Items {
				p := &list.Items[i]
				all[p.Name] = p
				if err := podFailure(p, image); err != nil {
					return nil, err
				}
				if readyFor(p) >= readySettle && p.Status.PodIP != "" {
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
			return nil, notReady(cs, ns, all[waiting[0]], waiting, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// readySettle: how long a pod must have been Ready before it is used, so
// that a container that exits right after starting (an --image whose
// entrypoint does not stay up) is reported as such, not as a failed sample.
const readySettle = 2 * time.Second

// readyFor is how long the pod has been Ready (0 when it is not).
func readyFor(p *corev1.Pod) time.Duration {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return max(time.Since(c.LastTransitionTime.Time), time.Nanosecond)
		}
	}
	return 0
}

// notReady is the one-line error for pods still not Ready after the wait:
// what the first one is doing and what the cluster last said about it.
func notReady(cs kubernetes.Interface, ns string, p *corev1.Pod, waiting []string, timeout time.Duration) error {
	name := waiting[0]
	others := ""
	if len(waiting) > 1 {
		others = fmt.Sprintf(" (and %d more: %s)", len(waiting)-1, strings.Join(waiting[1:], ", "))
	}
	if p != nil && p.Spec.NodeName != "" {
		name += " on " + p.Spec.NodeName
	}
	return fmt.Errorf("pod %s not Ready after %s%s: %s: fix what the event says (kubectl -n %s describe pod %s), or wait longer with --ready-timeout",
		name, timeout, others, PodState(cs, ns, p), ns, waiting[0])
}

// PodState says on one line what pod p is doing: its phase, a container
// that waits (and why) or runs unready, a condition not met, and the last
// warning event about it ("not created" for nil).
func PodState(cs kubernetes.Interface, ns string, p *corev1.Pod) string {
	state := "not created"
	if p != nil {
		state = "phase " + string(p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			switch {
			case c.State.Waiting != nil:
				state += fmt.Sprintf(", container %s waiting (%s)", c.Name, c.State.Waiting.Reason)
			case c.State.Running != nil && !c.Ready:
				state += fmt.Sprintf(", container %s running but not ready", c.Name)
			}
		}
		if len(p.Status.ContainerStatuses) == 0 {
			for _, c := range p.Status.Conditions {
				if c.Status != corev1.ConditionTrue && c.Reason != "" {
					state += fmt.Sprintf(", %s: %s", c.Type, c.Reason)
					break
				}
			}
		}
		if ev := lastWarning(cs, ns, p.Name); ev != "" {
			state += ", last event " + ev
		}
	}
	return state
}

// lastWarning is the newest Warning event about a pod, as "Reason: message"
// on one line ("" when there is none or events cannot be read).
func lastWarning(cs kubernetes.Interface, ns, pod string) string {
	lctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	list, err := cs.CoreV1().Events(ns).List(lctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return ""
	}
	// The newest warning, preferring failures ("FailedCreatePodSandBox",
	// "BackOff", ...) to advice such as "MissingClusterDNS".
	var last *corev1.Event
	rank := func(e *corev1.Event) int {
		if strings.HasPrefix(e.Reason, "Failed") || e.Reason == "BackOff" || e.Reason == "Unhealthy" {
			return 1
		}
		return 0
	}
	for i := range list.Items {
		e := &list.Items[i]
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		if last == nil || rank(e) > rank(last) || (rank(e) == rank(last) && eventTime(e).After(eventTime(last))) {
			last = e
		}
	}
	if last == nil {
		return ""
	}
	msg := oneLine(last.Message)
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return last.Reason + ": " + msg
}

func eventTime(e *corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return e.CreationTimestamp.Time
}

// podFailure is the reason a pod will not start, or nil while it may.
func podFailure(p *corev1.Pod, image string) error {
	where := p.Name
	if p.Spec.NodeName != "" {
		where += " on " + p.Spec.NodeName
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
				return fmt.Errorf("node %s cannot get image %s (%s): load it into every node (`vnetlab kube image -o vnetlab.tar`, then `vnetlab kube load CLUSTER vnetlab.tar` or `kind load image-archive vnetlab.tar`), or push it to a registry and pass --image", p.Spec.NodeName, image, w.Reason)
			case "CrashLoopBackOff", "CreateContainerError", "CreateContainerConfigError", "RunContainerError", "StartError":
				return fmt.Errorf("pod %s cannot start its container (%s: %s): fix the image (--image) or the node's runtime (kubectl -n %s describe pod %s)", where, w.Reason, oneLine(w.Message), p.Namespace, p.Name)
			}
		}
		if t := c.State.Terminated; t != nil {
			why := fmt.Sprintf("%s, code %d", t.Reason, t.ExitCode)
			if m := oneLine(t.Message); m != "" {
				why += ": " + m
			}
			return fmt.Errorf("pod %s: container exited (%s) before the run: the image must keep its entrypoint running (vnetlab's image runs `vnetlab kube pause`; `vnetlab kube image` writes it)", where, why)
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		return fmt.Errorf("pod %s failed (%s: %s): the node refused it; free the node or choose others with --nodes", where, p.Status.Reason, oneLine(p.Status.Message))
	}
	return nil
}

// oneLine folds a message from the cluster onto one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

package measure

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
)

func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Paths: []string{"pod"}, Placements: []string{"same-node"}}, ""},
		{Options{Paths: []string{"nodeport"}, Placements: []string{"same-node"}}, "unknown path"},
		{Options{Paths: []string{"pod"}, Placements: []string{"same-rack"}}, "unknown placement"},
		{Options{Paths: []string{"pod"}, Placements: []string{"cross-node"}, Nodes: []string{"a", "b", "c"}}, "at most two"},
	} {
		err := c.o.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: got %v, want %q", c.o, err, c.want)
		}
	}
}

func TestPodFailureNamesTheFix(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
		{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}}}}}}
	err := podFailure(p, "vnetlab.local/vnetlab:x")
	if err == nil || !strings.Contains(err.Error(), "kube load") || !strings.Contains(err.Error(), "n1") {
		t.Errorf("got %v", err)
	}
	p.Status.ContainerStatuses[0].State.Waiting.Reason = "ContainerCreating"
	if err := podFailure(p, "x"); err != nil {
		t.Errorf("a pod still being created is not a failure: %v", err)
	}
}

// A pod that never becomes Ready: after the bounded wait, one line names
// it, its node, phase, container state, the last warning about it and the fix.
func TestWaitReadyTimeoutNamesPodAndReason(t *testing.T) {
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: "vnetlab-x"}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "vnetlab",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
	ready := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client-same-node", Namespace: "vnetlab-x"}, Spec: corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.5", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}}}}
	now := metav1.Now()
	ev := func(name, reason, msg string, at metav1.Time) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "vnetlab-x"}, InvolvedObject: corev1.ObjectReference{Name: "server"},
			Type: corev1.EventTypeWarning, Reason: reason, Message: msg, LastTimestamp: at}
	}
	cs := fake.NewClientset(pending, ready,
		ev("e1", "FailedCreatePodSandBox", "old", metav1.NewTime(now.Add(-time.Minute))),
		ev("e2", "FailedCreatePodSandBox", "failed to setup network:\n no IP addresses available in range set", now),
		ev("e3", "MissingClusterDNS", "kubelet does not have ClusterDNS IP configured", metav1.NewTime(now.Add(time.Second))))
	start := time.Now()
	_, err := WaitReady(context.Background(), cs, "vnetlab-x", []string{"server", "client-same-node"}, "img", time.Second)
	if err == nil {
		t.Fatal("a pending pod was taken as Ready")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the wait took %s, bounded by 1s (+ one poll)", took)
	}
	msg := err.Error()
	for _, want := range []string{"pod server on n1 not Ready after 1s", "phase Pending", "container vnetlab waiting (ContainerCreating)",
		"last event FailedCreatePodSandBox: failed to setup network: no IP addresses available", "--ready-timeout", "describe pod server"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") || strings.Contains(msg, "client-same-node") {
		t.Errorf("want one line about the one pod not Ready: %q", msg)
	}
	// Both Ready: no error.
	pending.Status = ready.Status
	if _, err := cs.CoreV1().Pods("vnetlab-x").UpdateStatus(context.Background(), pending, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := WaitReady(context.Background(), cs, "vnetlab-x", []string{"server", "client-same-node"}, "img", time.Second); err != nil || len(got) != 2 {
		t.Errorf("ready pods: %v, %v", got, err)
	}
}

// A container that exits, a crash loop, a pod the node refuses: each is
// reported at once, naming the pod and the fix.
func TestPodFailureMessages(t *testing.T) {
	base := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "n1"}}
	}
	exited := base()
	exited.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", ExitCode: 0}}}}
	crash := base()
	crash.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 10s\nrestarting"}}}}
	refused := base()
	refused.Status.Phase, refused.Status.Reason, refused.Status.Message = corev1.PodFailed, "OutOfpods", "Node didn't have enough resource: pods"
	for _, c := range []struct {
		p    *corev1.Pod
		want []string
	}{
		{exited, []string{"pod server on n1: container exited (Completed, code 0)", "keep its entrypoint running"}},
		{crash, []string{"pod server on n1 cannot start its container (CrashLoopBackOff: back-off 10s restarting)", "--image"}},
		{refused, []string{"pod server on n1 failed (OutOfpods: Node didn't have enough resource: pods)", "--nodes"}},
	} {
		err := podFailure(c.p, "img")
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v, want one line with %q", err, w)
			}
		}
	}
}

// A program pinned through the exec starter runs under the guard's --cpu;
// an unpinned one under the plain guard.
func TestCommandOnCPU(t *testing.T) {
	e := &Exec{}
	p := e.CommandOnCPU(context.Background(), "pod-a", 1, "sockperf", "server", "--tcp").(*PodProcess)
	if got := strings.Join(p.argv, " "); got != "/usr/bin/vnetlab kube guard --cpu 1 -- sockperf server --tcp" {
		t.Errorf("pinned argv %q", got)
	}
	if p.prog != "sockperf" {
		t.Errorf("program %q", p.prog)
	}
	p = e.Command(context.Background(), "pod-a", "sockperf", "server").(*PodProcess)
	if got := strings.Join(p.argv, " "); got != "/usr/bin/vnetlab kube guard -- sockperf server" {
		t.Errorf("unpinned argv %q", got)
	}
	var _ engine.CPUStarter = e
}

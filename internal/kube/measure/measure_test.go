package measure

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vnetlab/vnetlab/internal/engine"
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

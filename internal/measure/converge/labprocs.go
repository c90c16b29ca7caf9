package converge

import (
	"context"
	"fmt"
	"strconv"

	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// A lab's cycle (svc converge, policy converge) runs its processes in the
// lab's pods: backends answering the probes with their pod's name
// (vnetlab whoami: a lab's pods share the machine's host name) and
// probers (vnetlab kube probe), each a node of the result.

// PodRef is a lab pod: its namespace and name.
type PodRef struct{ NS, Name string }

// LabProcs are the processes a lab's cycle started, by PID; Stop ends them.
type LabProcs struct {
	self  string
	procs []*proc.Cmd
}

// NewLabProcs finds the vnetlab binary the pods run.
func NewLabProcs() (*LabProcs, error) {
	self, err := engine.SelfBinary()
	if err != nil {
		return nil, err
	}
	return &LabProcs{self: self}, nil
}

// Backend starts a UDP backend on port in pod, answering with its name.
func (l *LabProcs) Backend(ctx context.Context, pod PodRef, port int) error {
	p := proc.Command(ctx, pod.NS, l.self, "whoami", "--name", pod.Name, "--udp", strconv.Itoa(port))
	if err := p.Start(); err != nil {
		return fmt.Errorf("backend in pod %s: %v", pod.Name, err)
	}
	l.procs = append(l.procs, p)
	return nil
}

// Probers starts a prober in each pod, probing targets in turn at pace p,
// their lines read into seen, and waits until each has reported.
func (l *LabProcs) Probers(ctx context.Context, pods []PodRef, targets []string, p Pace, seen *Seen) error {
	for _, pod := range pods {
		args := []string{"kube", "probe", "--node", pod.Name}
		for _, t := range targets {
			args = append(args, "--target", t)
		}
		args = append(args, "--interval", p.Interval.String(), "--timeout", p.ProbeTimeout.String())
		c := proc.Command(ctx, pod.NS, l.self, args...)
		out, err := c.StdoutPipe()
		if err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return fmt.Errorf("prober in pod %s: %v", pod.Name, err)
		}
		l.procs = append(l.procs, c)
		go seen.Read(out)
	}
	if err := seen.WaitNodes(ctx, len(pods), p.ChangeTimeout); err != nil {
		return fmt.Errorf("the probers never reported: %v", err)
	}
	return nil
}

// Stop kills every process started and waits for it.
func (l *LabProcs) Stop() {
	for _, p := range l.procs {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
}

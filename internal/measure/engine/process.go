package engine

import (
	"context"
	"fmt"
	"io"

	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Process is one program an engine runs for a sample: a process started in a
// lab namespace, or one started in a Kubernetes pod through the API's exec.
type Process interface {
	StdoutPipe() (io.ReadCloser, error)
	SetStderr(w io.Writer)
	Start() error
	Wait() error
	Kill()
	Output() ([]byte, error)
}

// Starter starts the engines' programs somewhere other than this machine's
// namespaces: where is what the Target names (a pod for Kubernetes).
type Starter interface {
	Command(ctx context.Context, where, name string, args ...string) Process
}

// CPUStarter is a Starter that can also start a program pinned to one CPU
// (Kubernetes exec does it with `vnetlab kube guard --cpu`).
type CPUStarter interface {
	Starter
	CommandOnCPU(ctx context.Context, where string, cpu int, name string, args ...string) Process
}

// noCPU: start the program wherever the scheduler likes.
const noCPU = -1

// command starts name in where (a namespace, or what tg.Starter
// understands), on cpu unless it is noCPU.
func (tg Target) command(ctx context.Context, where string, cpu int, name string, args ...string) (Process, error) {
	if tg.Starter != nil {
		return tg.starterCommand(ctx, where, cpu, name, args...)
	}
	c := proc.Command(ctx, where, name, args...)
	if cpu != noCPU {
		c.PinTo(cpu)
	}
	return localProcess{c}, nil
}

func (tg Target) starterCommand(ctx context.Context, where string, cpu int, name string, args ...string) (Process, error) {
	if cpu == noCPU {
		return tg.Starter.Command(ctx, where, name, args...), nil
	}
	cs, ok := tg.Starter.(CPUStarter)
	if !ok {
		return nil, fmt.Errorf("cannot pin %s to CPU %d where it runs: use --cpu-affinity none", name, cpu)
	}
	return cs.CommandOnCPU(ctx, where, cpu, name, args...), nil
}

// localProcess is a process in one of this machine's namespaces.
type localProcess struct{ *proc.Cmd }

func (p localProcess) SetStderr(w io.Writer) { p.Stderr = w }
func (p localProcess) Kill()                 { _ = p.Process.Kill() }

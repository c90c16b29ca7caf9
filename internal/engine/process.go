package engine

import (
	"context"
	"io"

	"github.com/vnetlab/vnetlab/internal/proc"
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

// command starts name in where (a namespace, or what tg.Starter understands).
func (tg Target) command(ctx context.Context, where, name string, args ...string) Process {
	if tg.Starter != nil {
		return tg.Starter.Command(ctx, where, name, args...)
	}
	return localProcess{proc.Command(ctx, where, name, args...)}
}

// localProcess is a process in one of this machine's namespaces.
type localProcess struct{ *proc.Cmd }

func (p localProcess) SetStderr(w io.Writer) { p.Stderr = w }
func (p localProcess) Kill()                 { _ = p.Process.Kill() }

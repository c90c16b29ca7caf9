package measure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// GuardArgs starts a program under `vnetlab kube guard` in the image: the
// guard kills the program when its stdin closes, which is what ending an
// exec stream does (a process started through the API's exec otherwise keeps
// running after the stream ends).
var GuardArgs = []string{image.VnetlabPath, "kube", "guard", "--"}

// Exec runs commands in pods through the API server's exec subresource.
type Exec struct {
	Client    kubernetes.Interface
	Config    *rest.Config
	Namespace string
}

// PodProcess is one command running in a pod's container.
type PodProcess struct {
	e       *Exec
	pod     string
	argv    []string
	prog    string // the program, for errors
	ctx     context.Context
	cancel  context.CancelFunc
	stdin   *io.PipeWriter
	stdinR  *io.PipeReader
	Stdout  io.Writer
	Stderr  io.Writer
	done    chan struct{}
	err     error
	started bool
	once    sync.Once
}

// Command prepares name args in pod (its only container), under the guard.
// A program given by its path on this machine runs from the image's
// /usr/bin; this vnetlab (the rr engine's), as the image's vnetlab.
func (e *Exec) Command(ctx context.Context, pod, name string, args ...string) engine.Process {
	return e.command(ctx, pod, name, args...)
}

// CommandOnCPU is Command with the program started pinned to cpu (the
// guard's --cpu), for --cpu-affinity with tools that cannot pin themselves.
func (e *Exec) CommandOnCPU(ctx context.Context, pod string, cpu int, name string, args ...string) engine.Process {
	p := e.command(ctx, pod, name, args...)
	guard := append(append([]string{}, GuardArgs[:len(GuardArgs)-1]...), "--cpu", strconv.Itoa(cpu), "--")
	p.argv = append(guard, p.argv[len(GuardArgs):]...)
	return p
}

func (e *Exec) command(ctx context.Context, pod, name string, args ...string) *PodProcess {
	if self, err := engine.SelfBinary(); err == nil && name == self {
		name = image.VnetlabPath
	} else if strings.Contains(name, "/") {
		name = "/usr/bin/" + path.Base(name)
	}
	return e.process(ctx, pod, name, append(append(append([]string{}, GuardArgs...), name), args...))
}

// process prepares argv in pod as it is (prog names it in errors).
func (e *Exec) process(ctx context.Context, pod, prog string, argv []string) *PodProcess {
	cctx, cancel := context.WithCancel(ctx)
	r, w := io.Pipe()
	return &PodProcess{e: e, pod: pod, prog: prog, argv: argv, ctx: cctx, cancel: cancel, stdin: w, stdinR: r, done: make(chan struct{})}
}

// StdoutPipe returns a reader of the command's output.
func (p *PodProcess) StdoutPipe() (io.ReadCloser, error) {
	r, w := io.Pipe()
	p.Stdout = w
	go func() { <-p.done; w.Close() }()
	return r, nil
}

// SetStderr sends the command's stderr to w.
func (p *PodProcess) SetStderr(w io.Writer) { p.Stderr = w }

// Start opens the exec stream.
func (p *PodProcess) Start() error {
	req := p.e.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.e.Namespace).Name(p.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: p.argv, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(p.e.Config, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(p.e.Config, "POST", req.URL())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return err
	}
	stdout, stderr := p.Stdout, p.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	p.started = true
	go func() {
		p.err = ex.StreamWithContext(p.ctx, remotecommand.StreamOptions{Stdin: p.stdinR, Stdout: stdout, Stderr: stderr})
		close(p.done)
	}()
	return nil
}

// Wait waits for the command to end.
func (p *PodProcess) Wait() error {
	if !p.started {
		return errors.New("not started")
	}
	<-p.done
	p.cancel()
	return p.err
}

// Kill ends the command: the guard sees its stdin close and kills it.
func (p *PodProcess) Kill() {
	p.once.Do(func() { p.stdin.Close() })
}

// Output runs the command and returns its stdout; stderr goes into the error.
func (p *PodProcess) Output() ([]byte, error) {
	var out, errb bytes.Buffer
	p.Stdout, p.Stderr = &out, &errb
	if err := p.Start(); err != nil {
		return nil, err
	}
	go func() { <-p.ctx.Done(); p.Kill() }()
	err := p.Wait()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%s in pod %s: %w: %s", p.prog, p.pod, err, proc.Said(errb.String(), out.String()))
	}
	return out.Bytes(), nil
}

package cluster

// Daemon supervision: every process a cluster runs is started detached,
// logged, journaled by PID (teardown stops it) and checked alive once the
// cluster is up.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/vnetlab/vnetlab/internal/system/proc"
)

type daemon struct {
	name  string
	pid   int
	start uint64
}

// checkDaemons fails when a daemon has exited since it started.
func (b *builder) checkDaemons() error {
	for _, d := range b.daemons {
		if !proc.Alive(d.pid, d.start) {
			return fmt.Errorf("%s exited: see %s", d.name, b.logPath(d.name))
		}
	}
	return nil
}

// startForwarder listens on a free loopback port of the machine and hands
// the socket to a detached `vnetlab kube forward` (no race for the port).
func (b *builder) startForwarder(cpNS string) (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	c := proc.Command(context.Background(), "", b.self, "kube", "forward", "--ns", cpNS, "--to", fmt.Sprintf("%s:%d", apiIP, apiPort))
	c.ExtraFiles = []*os.File{f}
	if err := b.startDaemon(c, "forward"); err != nil {
		return 0, err
	}
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (b *builder) logPath(name string) string { return filepath.Join(b.dir, "logs", name+".log") }

// startDaemon starts a detached daemon with its output in logs/NAME.log and
// journals it (teardown stops it by PID).
func (b *builder) startDaemon(c *proc.Cmd, name string) error {
	if err := os.MkdirAll(filepath.Join(b.dir, "logs"), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(b.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	c.Stdout, c.Stderr = logf, logf
	c.Detach()
	if err := c.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	if err := b.l.TrackProc(c.Process.Pid); err != nil {
		return fmt.Errorf("%s: %w (see %s)", name, err, b.logPath(name))
	}
	start, _ := proc.StartTime(c.Process.Pid)
	b.daemons = append(b.daemons, daemon{name: name, pid: c.Process.Pid, start: start})
	go c.Wait() // reap it if it exits while we are still here
	return nil
}

func (b *builder) daemon(ns, name, path string, args ...string) error {
	return b.startDaemon(proc.Command(context.Background(), ns, path, args...), name)
}

func (b *builder) k8s(name string) string { return filepath.Join(b.bin, name) }

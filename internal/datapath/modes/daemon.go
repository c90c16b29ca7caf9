package modes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Daemon is a process a mode leaves running for the lab's lifetime
// (ovsdb-server, ovs-vswitchd, the tap switch).
type Daemon struct {
	Cmd  *proc.Cmd
	Log  string        // its stdout+stderr
	Done chan struct{} // closed when it exits (while this vnetlab process lives)
}

// Exited reports whether the daemon has already exited.
func (d *Daemon) Exited() bool {
	select {
	case <-d.Done:
		return true
	default:
		return false
	}
}

// LogTail returns the last lines of the daemon's output, for error messages.
func (d *Daemon) LogTail() string {
	b, _ := os.ReadFile(d.Log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// StartDaemon starts c inside its namespace, detached so that it outlives
// `vnetlab up`, with stdout and stderr appended to StateDir/logName, and
// journals its PID: down and clean stop it, also after vnetlab was killed.
// (A kill between start and journal still leaves it inside a lab namespace,
// where teardown stops every process before deleting the namespace.)
func (e *Env) StartDaemon(c *proc.Cmd, logName string) (*Daemon, error) {
	if e.Track == nil || e.StateDir == "" {
		return nil, errors.New("internal error: this mode starts daemons and needs a lab journal (Env.Track, Env.StateDir)")
	}
	name := filepath.Base(c.Path)
	logPath := filepath.Join(e.StateDir, logName)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own copy
	c.Stdout, c.Stderr = log, log
	c.Detach()
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	d := &Daemon{Cmd: c, Log: logPath, Done: make(chan struct{})}
	// Reap it if it exits while we live (down from this same process, a crash).
	go func() { _ = c.Wait(); close(d.Done) }()
	if err := e.Track(c.Process.Pid); err != nil {
		_ = c.Process.Kill()
		return nil, fmt.Errorf("%s: %w (log: %s)", name, err, d.LogTail())
	}
	return d, nil
}

package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// serverReadyTimeout: how long a server may take to print its ready line.
const serverReadyTimeout = 5 * time.Second

// startServer starts a server program in namespace ns and waits until it
// prints a line containing ready. stop kills it (by its PID) and waits.
// If the server dies first, the error carries what it printed.
func startServer(ctx context.Context, tg Target, ns, ready, name string, args ...string) (stop func(), err error) {
	srv := tg.command(ctx, ns, name, args...)
	stdout, err := srv.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := &syncBuffer{}
	srv.SetStderr(stderr)
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start %s in %s: %w", name, ns, err)
	}
	stop = func() { srv.Kill(); _ = srv.Wait() }
	if err := waitForLine(stdout, ready, serverReadyTimeout); err != nil {
		stop()
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		if msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return nil, fmt.Errorf("%s server in %s: %w", name, ns, err)
	}
	go io.Copy(io.Discard, stdout) // never let a full pipe block the server
	return stop, nil
}

// syncBuffer is a bytes.Buffer safe to write from exec's copying goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

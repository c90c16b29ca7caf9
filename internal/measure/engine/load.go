package engine

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Latency under load (flent's RRUL shape): while an rr/crr test
// runs, spec.Load iperf3 streams saturate the same path, client to server,
// through the port iperf3 uses (free during an rr/crr sample, and a
// Service path's clusterIP serves it too). The rr test's latency over
// the same test's with load 0 is the inflation the report shows.

// loadLead: the streams run this long before the measured test starts,
// past TCP's slow start, so the path is full when it does.
const loadLead = time.Second

// startLoad starts the load and waits loadLead; stop ends it. The load's
// processes are not pinned: they compete for the CPUs as a neighbour does.
func startLoad(ctx context.Context, tg Target, spec Spec) (stop func(), err error) {
	port := strconv.Itoa(Iperf3Port)
	stopServer, err := startServer(ctx, tg, tg.ServerNS, noCPU, "Server listening", "iperf3", "-s", "-1", "-p", port, "--forceflush")
	if err != nil {
		return nil, fmt.Errorf("load server: %w", err)
	}
	secs := (loadLead + spec.Duration + clientGrace).Seconds()
	client, err := tg.clientCommand(ctx, noCPU, "iperf3", "-c", tg.Addr, "-p", port, "-P", strconv.Itoa(spec.Load),
		"-t", strconv.FormatFloat(secs, 'f', 0, 64), "--connect-timeout", "5000")
	if err != nil {
		stopServer()
		return nil, err
	}
	if err := client.Start(); err != nil {
		stopServer()
		return nil, fmt.Errorf("load client: %w", err)
	}
	stop = func() {
		client.Kill()
		_ = client.Wait()
		stopServer()
	}
	select {
	case <-time.After(loadLead):
	case <-ctx.Done():
		stop()
		return nil, ctx.Err()
	}
	return stop, nil
}

// checkLoad refuses a load when iperf3, which makes it, is not installed.
func checkLoad(spec Spec) error {
	if spec.Load == 0 {
		return nil
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		return field.Errorf("load", "iperf3 is not installed (it makes the load of {load} %d): apt-get install iperf3", spec.Load)
	}
	return nil
}

package proc

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StopGroup stops a process vnetlab started and what it left running: a
// shell that starts a background sleep and then becomes a sleep itself
// (exec), as kube-proxy runs iptables-restore; the background sleep,
// reparented when its parent goes, would otherwise outlive it.
func TestStopGroupStopsWhatTheLeaderStarted(t *testing.T) {
	c := Command(context.Background(), "", "sh", "-c", "sleep 60 & echo $!; exec sleep 61")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the background sleep's PID %q: %v", line, err)
	}
	childStart, err := StartTime(child)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Stop(child, childStart, 0) })
	leader := c.Process.Pid
	leaderStart, err := StartTime(leader)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := group(child); err != nil || g != leader {
		t.Fatalf("the background sleep's group %d (%v), want the leader's %d", g, err, leader)
	}
	StopGroup(leader, leaderStart, 5*time.Second)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not exit")
	}
	deadline := time.Now().Add(10 * time.Second)
	for Alive(child, childStart) && !isZombie(child) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader's background sleep (pid %d) still runs", child)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

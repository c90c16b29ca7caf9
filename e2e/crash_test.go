package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func journalLines(name string) int {
	f, err := os.Open("/run/vnetlab/labs/" + name + "/journal")
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
	}
	return n
}

func labStatus(name string) string {
	b, err := os.ReadFile("/run/vnetlab/labs/" + name + "/state.json")
	if err != nil {
		return ""
	}
	var st struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(b, &st)
	return st.Status
}

// kill -9 in the middle of `up`, then `clean`: no namespace, state or process left.
func TestKillDuringUpThenClean(t *testing.T) {
	const name = "e2kill"
	cmd := exec.Command(bin, "up", "--name", name, "--mode", "bridge", "--pods", "200")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vnetlab(t, "down", name) })
	// Wait until the journal shows the build has started, then kill it.
	waitFor(t, "up to start building", 10*time.Second, func() bool { return journalLines(name) > 50 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if st := labStatus(name); st != "building" {
		t.Fatalf("killed lab status = %q: the kill did not land mid-build", st)
	}
	if len(labNamespaces(name)) == 0 {
		t.Fatal("no namespace existed when up was killed: the test proves nothing")
	}
	r := must(t, "clean")
	if !strings.Contains(r.stdout, "removed") {
		t.Errorf("clean output: %q", r.stdout)
	}
	assertGone(t, name)
	if ents, _ := os.ReadDir("/run/netns"); len(ents) > 0 {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "vnl-"+name) {
				t.Errorf("left: %s", e.Name())
			}
		}
	}
}

// nsInode returns the inode of a named namespace (0 if gone).
func nsInode(name string) uint64 {
	var st syscall.Stat_t
	if syscall.Stat("/run/netns/"+name, &st) != nil {
		return 0
	}
	return st.Ino
}

// pidsIn lists processes whose network namespace has inode ino.
func pidsIn(ino uint64) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil && st.Ino == ino {
			pids = append(pids, pid)
		}
	}
	return pids
}

// kill -9 in the middle of `run` while iperf3 runs in the pods, then clean:
// the iperf3 processes, namespaces and state are gone.
func TestKillDuringRunThenClean(t *testing.T) {
	cmd := exec.Command(bin, "run", "--modes", "veth-routed", "--tests", "tcp_stream", "--duration", "20s", "--repeat", "1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var serverNS string
	var pids []int
	waitFor(t, "iperf3 to run inside a pod", 20*time.Second, func() bool {
		ents, _ := os.ReadDir("/run/netns")
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "vnl-run") && strings.HasSuffix(e.Name(), "-pod-a") {
				if p := pidsIn(nsInode(e.Name())); len(p) > 0 {
					serverNS, pids = e.Name(), p
					return true
				}
			}
		}
		return false
	})
	time.Sleep(300 * time.Millisecond) // the client is running too
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	must(t, "clean")
	if nsInode(serverNS) != 0 {
		t.Errorf("namespace %s survived clean", serverNS)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				break
			}
			if time.Now().After(deadline) {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				t.Errorf("process %d (%s) from the killed run is still alive", pid, strings.TrimSpace(string(comm)))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	labs, _ := os.ReadDir("/run/vnetlab/labs")
	for _, l := range labs {
		if strings.HasPrefix(l.Name(), "run") {
			t.Errorf("run's lab %s survived clean", l.Name())
		}
	}
}

// A lab in use by a running vnetlab (its lock held) is neither removed by
// `down` nor by `clean`.
func TestLabInUseIsNotRemoved(t *testing.T) {
	cmd := exec.Command(bin, "run", "--modes", "host", "--tests", "tcp_stream", "--duration", "4s", "--repeat", "1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	var lab string
	waitFor(t, "run's lab", 10*time.Second, func() bool {
		ents, _ := os.ReadDir("/run/vnetlab/labs")
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), "run") && labStatus(e.Name()) == "ready" {
				lab = e.Name()
				return true
			}
		}
		return false
	})
	r := vnetlab(t, "down", lab)
	if r.code == 0 || !strings.Contains(r.stderr, "in use by another vnetlab process") {
		t.Errorf("down of a lab in use: exit %d, %q", r.code, r.stderr)
	}
	r = must(t, "clean", "-o", "json")
	var rep struct {
		Busy []string `json:"labs_in_use_skipped"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !slices.Contains(rep.Busy, lab) {
		t.Errorf("clean did not report %s as in use: %q (%v)", lab, r.stdout, err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the run was disturbed: %v", err)
	}
}

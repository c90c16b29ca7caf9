package profile

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

const killChildEnv = "VNETLAB_PROFILE_KILL_CHILD"

// The child: open a sampler, start a window, print the programs' IDs, wait
// to be killed.
func TestMain(m *testing.M) {
	if os.Getenv(killChildEnv) != "" {
		s, err := Open(0)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		if err := s.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		var ids []string
		for _, p := range []*ebpf.Program{s.objs.OnSample, s.objs.TpNetifRx, s.objs.TpKfreeSkb} {
			info, err := p.Info()
			if err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			id, _ := info.ID()
			ids = append(ids, strconv.Itoa(int(id)))
		}
		fmt.Println("ids", strings.Join(ids, " "))
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// kill -9 in the middle of a window leaves nothing attached: every program
// was held by the process's file descriptors (perf events, tracepoint
// links), none pinned, so the kernel frees them all.
func TestNothingStaysAfterKill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ids ") {
		t.Fatalf("child: %q %v", line, err)
	}
	var ids []ebpf.ProgramID
	for _, f := range strings.Fields(strings.TrimPrefix(line, "ids ")) {
		n, _ := strconv.Atoi(f)
		ids = append(ids, ebpf.ProgramID(n))
	}
	for _, id := range ids {
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			t.Fatalf("program %d of the running child: %v", id, err)
		}
		p.Close()
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The kernel frees programs after an RCU grace period: wait seconds.
	deadline := time.Now().Add(10 * time.Second)
	for _, id := range ids {
		for {
			p, err := ebpf.NewProgramFromID(id)
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			if err == nil {
				p.Close()
			}
			if time.Now().After(deadline) {
				t.Fatalf("program %d still loaded 10 s after kill -9 (err %v)", id, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

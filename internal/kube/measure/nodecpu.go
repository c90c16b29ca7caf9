package measure

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/measure/cpu"
)

// A node's CPU on a cluster vnetlab does not run: a hostNetwork helper pod
// per node (Options.NodeCPUPods) runs `vnetlab kube cpu-agent` through one
// exec stream kept open for the whole run; each newline written to it
// answers one line, the node's /proc/stat and /proc/softirqs counters
// (cpu.Snapshot as JSON). A reading costs the node a read of two /proc
// files, not a process start (runc exec would charge each sample tens of
// ms). /proc/stat is not namespaced: any container sees its node's.
// hostNetwork keeps the helper off the pod network under test (no IP, no
// CNI call). The helpers go with the session's namespace.

// CPUAgentArgs is the agent's command line in the image; it exits when its
// stdin closes.
var CPUAgentArgs = []string{image.VnetlabPath, "kube", "cpu-agent"}

// nodeCPUTimeout bounds one reading of every node.
const nodeCPUTimeout = 10 * time.Second

// nodeCPUPod names the helper pod on the i-th node of the session.
func nodeCPUPod(i int) string { return "cpu-" + strconv.Itoa(i) }

func (s *Session) nodeCPUPods() []PodSpec {
	var out []PodSpec
	for i, n := range s.Nodes {
		out = append(out, PodSpec{Name: nodeCPUPod(i), Node: n.Name, HostNetwork: true})
	}
	return out
}

// NodeCPU reads the session's nodes' counters through their helper pods
// (a runner.NodeMeter); Close ends the agents.
type NodeCPU struct {
	agents  map[string]*cpuAgent // by node name
	bootIDs map[string]string    // by node name, from the last answers
	broken  error                // why readings stopped
}

type cpuAgent struct {
	p      *PodProcess
	lines  chan string // the agent's answers, closed when its stream ends
	bootID string      // its machine's, from its first answer
}

// StartNodeCPU opens an agent stream to each node's helper pod (the
// session was set up with Options.NodeCPUPods) and checks it answers.
func (s *Session) StartNodeCPU(ctx context.Context) (*NodeCPU, error) {
	m := &NodeCPU{agents: map[string]*cpuAgent{}}
	for i, n := range s.Nodes {
		p := s.Exec.process(context.WithoutCancel(ctx), nodeCPUPod(i), "vnetlab kube cpu-agent", CPUAgentArgs)
		out, _ := p.StdoutPipe()
		if err := p.Start(); err != nil {
			m.Close()
			return nil, fmt.Errorf("node %s: cpu agent: %v", n.Name, err)
		}
		a := &cpuAgent{p: p, lines: make(chan string, 8)} // room for late answers after a timeout
		go func() {
			defer close(a.lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				a.lines <- sc.Text()
			}
			_, _ = io.Copy(io.Discard, out)
		}()
		m.agents[n.Name] = a
	}
	if _, err := m.Take(ctx); err != nil {
		m.Close()
		return nil, err
	}
	for n, a := range m.agents {
		a.bootID = m.bootIDs[n]
	}
	return m, nil
}

// Machine is the boot id of the machine node runs on, "" when that is
// this machine (a local cluster measured through its kubeconfig: every
// node then reads this machine's /proc/stat, which must not be added up).
func (m *NodeCPU) Machine(node string) string {
	if a := m.agents[node]; a != nil && a.bootID != localBootID() {
		return a.bootID
	}
	return ""
}

// BootIDPath identifies a running kernel: the same file read in two
// places says they are one machine.
const BootIDPath = "/proc/sys/kernel/random/boot_id"

func localBootID() string {
	b, _ := os.ReadFile(BootIDPath)
	return strings.TrimSpace(string(b))
}

// Take reads every node's counters, all nodes asked at once. After a
// reading that failed, every later one fails too (a late answer would pair
// the next question with the wrong reading): the samples after it have no
// per-node CPU.
func (m *NodeCPU) Take(ctx context.Context) (map[string]cpu.Snapshot, error) {
	if m.broken != nil {
		return nil, m.broken
	}
	type answer struct {
		node string
		a    AgentAnswer
		err  error
	}
	answers := make(chan answer, len(m.agents))
	for n, a := range m.agents {
		go func() {
			ans := answer{node: n}
			if _, err := a.p.stdin.Write([]byte("\n")); err != nil {
				ans.err = fmt.Errorf("node %s: cpu agent: %v", n, err)
			} else if line, ok := <-a.lines; !ok {
				ans.err = fmt.Errorf("node %s: cpu agent ended", n)
			} else if ans.a, ans.err = ParseAgentLine(line); ans.err != nil {
				ans.err = fmt.Errorf("node %s: cpu agent: %v", n, ans.err)
			}
			ans.a.At = time.Now() // this machine's clock, as the window marks
			answers <- ans
		}()
	}
	timeout := time.NewTimer(nodeCPUTimeout)
	defer timeout.Stop()
	out := map[string]cpu.Snapshot{}
	m.bootIDs = map[string]string{}
	for range m.agents {
		select {
		case a := <-answers:
			if a.err != nil {
				m.broken = a.err
				return nil, a.err
			}
			out[a.node], m.bootIDs[a.node] = a.a.Snapshot, a.a.BootID
		case <-timeout.C:
			m.broken = fmt.Errorf("a node's cpu agent did not answer in %s", nodeCPUTimeout)
			return nil, m.broken
		case <-ctx.Done():
			m.broken = ctx.Err()
			return nil, m.broken
		}
	}
	return out, nil
}

// Close ends every agent's stream (the agent exits on EOF) and waits.
func (m *NodeCPU) Close() {
	for _, a := range m.agents {
		a.p.Kill()
	}
	for _, a := range m.agents {
		done := make(chan struct{})
		go func() { _ = a.p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(nodeCPUTimeout):
			a.p.cancel()
		}
	}
}

// AgentAnswer is what the agent answers, as one JSON line: its machine's
// boot id and counters.
type AgentAnswer struct {
	BootID string `json:"boot_id"`
	cpu.Snapshot
}

// ParseAgentLine reads an agent's answer.
func ParseAgentLine(line string) (AgentAnswer, error) {
	var a AgentAnswer
	if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &a); err != nil || a.BootID == "" {
		return a, fmt.Errorf("bad answer %q (want a JSON snapshot with boot_id)", line)
	}
	return a, nil
}

// ServeCPUAgent is the agent: a snapshot on w for each line read from r,
// until r ends.
func ServeCPUAgent(r io.Reader, w io.Writer) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s, err := cpu.Take()
		if err != nil {
			return err
		}
		b, err := json.Marshal(AgentAnswer{BootID: localBootID(), Snapshot: s})
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return sc.Err()
}

package bench

// Each node's CPU per sample (runner.NodeMeter). A local cluster's nodes
// are namespaces of this machine and share its /proc/stat, so a node's CPU
// is its cgroup's: kubelet's cgroupRoot holds its pods, and every engine
// process `kube run` starts there through exec joins its pod's cgroup. The
// node's daemons (kubelet, containerd, kube-proxy) run outside it, and
// softirq time is not kept per cgroup: the ticks that interrupt one of the
// node's processes count in its system time, the rest only in the
// machine's softirq (the cells' whole-machine CPU). Any other cluster: a
// helper pod on each node reads that node's /proc/stat
// (measure.Session.StartNodeCPU), and a cell's CPU is its nodes' sum.

import (
	"context"
	"fmt"
	"time"

	"github.com/vnetlab/vnetlab/internal/kube/cluster"
	"github.com/vnetlab/vnetlab/internal/kube/measure"
	"github.com/vnetlab/vnetlab/internal/measure/cpu"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
)

// How each kind of reading is described in the results (Cluster.NodeCPU).
const (
	nodeCPUCgroupText = results.NodeCPUCgroup + ": each node's pods from its cgroup's cpu.stat (user, system); " +
		"softirq is not kept per cgroup: the ticks that interrupt a pod count in its system time, the rest only in the cell's whole-machine softirq; the node's daemons are not counted"
	nodeCPUProcStatText = results.NodeCPUProcStat + ": each node's /proc/stat and /proc/softirqs, read by a hostNetwork helper pod (vnetlab kube cpu-agent); a cell's CPU is its client's and server's nodes' sum (each machine once)"
)

// cgroupMeter reads a local cluster's nodes' cgroups.
type cgroupMeter map[string]string // node name -> cgroup v2 directory

// localNodeCPU is the cgroup meter of the session's nodes; it fails when a
// node's cgroup cannot be read.
func localNodeCPU(sess *measure.Session) (cgroupMeter, error) {
	m := cgroupMeter{}
	for _, n := range sess.Nodes {
		dir, err := cluster.NodeCgroup(n.Name)
		if err != nil {
			return nil, err
		}
		m[n.Name] = dir
	}
	_, err := m.Take(context.Background())
	return m, err
}

func (m cgroupMeter) Take(context.Context) (map[string]cpu.Snapshot, error) {
	out := map[string]cpu.Snapshot{}
	for n, dir := range m {
		t, err := cgroup.ReadCPUTime(dir)
		if err != nil {
			return nil, fmt.Errorf("node %s: %v", n, err)
		}
		out[n] = cpu.FromTimes(time.Now(), t.User, t.System)
	}
	return out, nil
}

// Machine: every node is on this machine.
func (cgroupMeter) Machine(string) string { return "" }

// nodeMeter is how the session's nodes' CPU is read (a local cluster's:
// cgroups; another's: the helper pods the session was set up with) and
// its description; nil and a warning when it cannot be read, the run going
// on without per-node CPU. stop ends the helpers' streams.
func nodeMeter(ctx context.Context, sess *measure.Session, local bool, say func(string, ...any)) (m runner.NodeMeter, how string, stop func()) {
	stop = func() {}
	if local {
		cm, err := localNodeCPU(sess)
		if err != nil {
			say("warning: no per-node CPU: %v", err)
			return nil, "", stop
		}
		return cm, nodeCPUCgroupText, stop
	}
	nc, err := sess.StartNodeCPU(ctx)
	if err != nil {
		say("warning: no per-node CPU: %v", err)
		return nil, "", stop
	}
	return nc, nodeCPUProcStatText, nc.Close
}

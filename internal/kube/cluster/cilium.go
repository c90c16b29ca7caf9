package cluster

// Cilium as a local cluster's CNI (kube up --cni cilium): cilium-agent on
// every node and cilium-operator-generic beside the control plane, host
// daemons started like kubelet (detached, logged, journaled by PID), each in
// a private mount namespace of its own (`vnetlab kube cilium-exec`,
// ciliumexec.go) where the paths Cilium hard-codes are the node's:
//
//   - /run/cilium (its state, API socket, pid file) is the node's cilium-run
//     directory, bound there;
//   - /run/cilium/cgroupv2, the agent's --cgroup-root, is the node's own
//     cgroup in the unified hierarchy (NodeCgroup), bound there: the agent
//     finds a cgroup2 mount and never mounts the machine's whole hierarchy,
//     so its socket programs could only ever attach below the node;
//   - --bpf-root is a fresh bpffs mounted in the node's directory, so every
//     pin is the node's and goes with the lab's directory;
//   - --lib-dir is a copy of the build's lib per node: the agent writes the
//     kernel's probed features into it;
//   - /proc/sys is read-only but for /proc/sys/net (the node's namespace):
//     the agent's writes of machine-wide sysctls (CiliumLockedSysctls) fail,
//     as it tolerates.
//
// The agent reaches the API server through the cluster's internal
// kubeconfig, allocates pod addresses from the node's spec.podCIDR (IPAM
// "kubernetes"; kube up sets it), keeps identities in CRDs (no kvstore),
// routes natively between the nodes (they share the control plane's
// bridge), compiles its datapath with Debian's clang-19, and writes the
// node's CNI configuration once ready: then the node gets Ready. With
// --proxy iptables|nftables kube-proxy runs beside it (no kube-proxy
// replacement); pods' ClusterIP connections are balanced by the agent's
// programs on their veths before kube-proxy sees them. With --proxy cilium
// the agent replaces kube-proxy (clusternet.CiliumKPR): its socket LB sits
// on its cgroup root, the node's cgroup, and no kube-proxy runs.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/proc"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

const (
	// CiliumRun is the run directory Cilium's commands use (its state, API
	// socket, pid file; /var/run/cilium is the same): each one's own
	// directory bound there in its mount namespace.
	CiliumRun = "/run/cilium"
	// ciliumCgroupMount is the agent's --cgroup-root.
	ciliumCgroupMount = CiliumRun + "/cgroupv2"
	// Per node, under its directory.
	ciliumRunDir = "cilium-run"
	ciliumLibDir = "cilium-lib"
	ciliumBPFFS  = "bpffs"
	ciliumCNIBin = "cni-bin"
	// ciliumConflist is the CNI configuration the agent writes once ready,
	// into its run directory; kube up copies it into the node's CNI
	// directory (copyCiliumConflist).
	ciliumConflist = "05-cilium.conflist"
	// The operator's run directory, under the cluster's.
	ciliumOperatorRun = "cilium-operator-run"
	// ciliumClangDir holds Debian's clang-19, which the agent runs as
	// "clang" from PATH to compile its datapath (the LLVM release Cilium
	// v1.19 ships).
	ciliumClangDir = "/usr/lib/llvm-19/bin"
	// ciliumWait bounds the wait for an agent's CNI configuration: the
	// first start compiles the host datapath on a shared 2-CPU machine.
	ciliumWait = 5 * time.Minute
)

// CiliumLockedSysctls are machine-wide sysctls cilium-agent writes at start
// and a cluster must never change: unprivileged_bpf_disabled, once 1, is
// locked by the kernel until reboot. The agent's mount namespace has them
// read-only (CiliumExec refuses to start it otherwise) and MachineState
// checks them after every cluster.
var CiliumLockedSysctls = []string{"kernel.unprivileged_bpf_disabled", "kernel.timer_migration"}

// validateCilium checks what runs with --cni cilium.
func (s Spec) validateCilium() error {
	if s.CNIMode != "" {
		return field.Errorf("cni_mode", "{cni_mode} %s: modes are vnetlab's plugin's: {cni} %s routes natively", s.CNIMode, clusternet.CNICilium)
	}
	if p, err := clusternet.GetProxy(s.Proxy); err == nil && p.Vnetlab {
		return field.Errorf("proxy", "{proxy} %s with {cni} %s: vnetlab's proxy attaches programs to the node's cgroup and veths, where Cilium's are: use {proxy} %s, or %s (Cilium's own)",
			s.Proxy, clusternet.CNICilium, clusternet.IPTables+"|"+clusternet.NFTables, clusternet.CiliumKPR)
	}
	if e, err := clusternet.GetEnforcer(s.networkPolicy()); err == nil && e.Enforces && e.CNI != clusternet.CNICilium {
		return field.Errorf("network_policy", "{network_policy} %s with {cni} %s: Cilium's programs on the pods' veths route past other enforcers' rules: use {network_policy} %s (its agent's own) or %s",
			s.NetworkPolicy, clusternet.CNICilium, clusternet.PolicyCilium, clusternet.PolicyNone)
	}
	return nil
}

// ciliumPreflight checks what the agent needs of this machine.
func ciliumPreflight() error {
	if _, err := os.Stat(filepath.Join(ciliumClangDir, "clang")); err != nil {
		return fmt.Errorf("--cni %s needs clang-19 (%s/clang) to compile its datapath: apt-get install clang-19", clusternet.CNICilium, ciliumClangDir)
	}
	if _, err := NodeCgroup("probe"); err != nil {
		return fmt.Errorf("--cni %s needs a cgroup v2 hierarchy for each node's cgroup: %v", clusternet.CNICilium, err)
	}
	return nil
}

// ciliumCNIBinDir writes node n's CNI plugin directory: cilium-cni as a
// wrapper that names the node's agent socket (the plugin runs in the
// machine's mount namespace, where /run/cilium is not the node's), and
// Debian's loopback.
func (b *builder) ciliumCNIBinDir(n node) (string, error) {
	dir := filepath.Join(n.dir, ciliumCNIBin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	sock := filepath.Join(n.dir, ciliumRunDir, "cilium.sock")
	wrapper := fmt.Sprintf("#!/bin/sh\nexec env CILIUM_SOCK=%s %s \"$@\"\n", sock, filepath.Join(b.cilium, binaries.CiliumCNI))
	if err := os.WriteFile(filepath.Join(dir, binaries.CiliumCNI), []byte(wrapper), 0o755); err != nil {
		return "", err
	}
	if err := os.Symlink(filepath.Join(systemCNIDir, "loopback"), filepath.Join(dir, "loopback")); err != nil && !os.IsExist(err) {
		return "", err
	}
	return dir, nil
}

// prepareCiliumNode makes node n's run directory, its copy of the build's
// lib and its bpffs (under the node's directory: the lab's teardown
// unmounts it).
func (b *builder) prepareCiliumNode(n node) error {
	if err := os.MkdirAll(filepath.Join(n.dir, ciliumRunDir), 0o755); err != nil {
		return err
	}
	if err := os.CopyFS(filepath.Join(n.dir, ciliumLibDir), os.DirFS(filepath.Join(b.cilium, binaries.CiliumLibDir))); err != nil {
		return fmt.Errorf("copy Cilium's lib: %w", err)
	}
	fs := filepath.Join(n.dir, ciliumBPFFS)
	if err := os.MkdirAll(fs, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("bpf", fs, "bpf", 0, ""); err != nil {
		return fmt.Errorf("mount a bpffs on %s: %w", fs, err)
	}
	return nil
}

// ciliumExec is a command running program (a Cilium command of the build)
// through `vnetlab kube cilium-exec`, in namespace ns, with run bound on
// /run/cilium and, if not "", cgroupDir on the agent's cgroup root.
func (b *builder) ciliumExec(ns, run, cgroupDir, program string, args ...string) *proc.Cmd {
	argv := []string{"kube", "cilium-exec", "--run", run}
	if cgroupDir != "" {
		argv = append(argv, "--cgroup", cgroupDir)
	}
	argv = append(append(argv, "--", filepath.Join(b.cilium, program)), args...)
	return proc.Command(context.Background(), ns, b.self, argv...)
}

// startCiliumOperator starts cilium-operator-generic in the control plane's
// namespace, once the API server answers: it registers Cilium's CRDs, which
// the agents wait for. Its watcher of pods Cilium does not manage is off
// (it would delete them).
func (b *builder) startCiliumOperator(kubeconfig string) error {
	// The mount point of every daemon's run directory: journaled when
	// this cluster makes it, also while another cluster is up
	// (recordMachinePaths journals nothing then), so that kube down
	// removes it.
	if _, err := os.Stat(CiliumRun); err != nil {
		if err := b.l.Journal().Record(lab.KindDir, CiliumRun); err != nil {
			return err
		}
		if err := os.MkdirAll(CiliumRun, 0o755); err != nil {
			return err
		}
	}
	run := filepath.Join(b.dir, ciliumOperatorRun)
	if err := os.MkdirAll(run, 0o755); err != nil {
		return err
	}
	b.say("cilium-operator-generic %s", binaries.CiliumVersion)
	c := b.ciliumExec(b.l.State.Ext, run, "", binaries.CiliumOperator,
		"--k8s-kubeconfig-path="+kubeconfig, "--k8s-namespace=kube-system",
		"--identity-allocation-mode=crd", "--ipam=kubernetes", "--enable-ipv4=true", "--enable-ipv6=false",
		"--enable-metrics=false", "--enable-gops=false", "--operator-api-serve-addr=127.0.0.1:9234",
		"--unmanaged-pod-watcher-interval=0")
	return b.startDaemon(c, "cilium-operator")
}

// ciliumCRDs are the CRDs the agents wait for.
var ciliumCRDs = []string{"ciliumnodes", "ciliumendpoints", "ciliumidentities"}

// startCilium gives every node its podCIDR, waits for the operator's CRDs,
// starts each node's agent and waits for the CNI configuration each writes
// when ready.
func (b *builder) startCilium(ctx context.Context, cs kubernetes.Interface, kubeconfig string) error {
	for _, n := range b.nodes {
		if err := setPodCIDR(ctx, cs, n); err != nil {
			return err
		}
	}
	if err := waitFor(ctx, 2*time.Minute, "cilium-operator to register "+strings.Join(ciliumCRDs, ", ")+" (see "+b.logPath("cilium-operator")+")", func() bool {
		return ciliumCRDsServed(cs)
	}); err != nil {
		return err
	}
	start := time.Now()
	for _, n := range b.nodes {
		if err := b.startCiliumAgent(n, kubeconfig); err != nil {
			return fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	b.say("waiting for cilium-agent on %d nodes (the first start compiles its datapath)", len(b.nodes))
	for _, n := range b.nodes {
		conf := filepath.Join(n.dir, ciliumRunDir, ciliumConflist)
		name := n.name + "-cilium-agent"
		var data []byte
		if err := waitFor(ctx, ciliumWait, "cilium-agent on "+n.name+" to write "+conf+" (see "+b.logPath(name)+")", func() bool {
			var err error
			data, err = os.ReadFile(conf)
			return err == nil && len(data) > 0
		}); err != nil {
			return err
		}
		b.say("cilium-agent on %s ready after %s", n.name, time.Since(start).Round(100*time.Millisecond))
		if err := os.WriteFile(filepath.Join(n.dir, "cni", ciliumConflist), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ciliumCRDsServed says whether the API server serves every ciliumCRDs.
func ciliumCRDsServed(cs kubernetes.Interface) bool {
	rl, err := cs.Discovery().ServerResourcesForGroupVersion("cilium.io/v2")
	if err != nil {
		return false
	}
	have := map[string]bool{}
	for _, r := range rl.APIResources {
		have[r.Name] = true
	}
	for _, c := range ciliumCRDs {
		if !have[c] {
			return false
		}
	}
	return true
}

// startCiliumAgent starts node n's agent in its namespace.
func (b *builder) startCiliumAgent(n node, kubeconfig string) error {
	cg, err := NodeCgroup(n.name)
	if err != nil {
		return err
	}
	run := filepath.Join(n.dir, ciliumRunDir)
	p, err := clusternet.GetProxy(b.spec.Proxy)
	if err != nil {
		return err
	}
	c := b.ciliumExec(n.ns, run, cg, binaries.CiliumAgent, ciliumAgentArgs(n, kubeconfig, p.CNI == clusternet.CNICilium, b.spec.networkPolicy() == clusternet.PolicyCilium)...)
	c.Env = append(os.Environ(), "K8S_NODE_NAME="+n.name, "PATH="+ciliumClangDir+":"+os.Getenv("PATH"))
	return b.startDaemon(c, n.name+"-cilium-agent")
}

// ciliumAgentArgs are node n's agent's flags: IPv4 only, the node's eth0,
// native routing over the control plane's bridge, its kube-proxy
// replacement when kpr (its socket LB attaches to its cgroup root: the
// node's cgroup), its NetworkPolicy enforcement when policy (Cilium's
// default mode: an endpoint no policy selects allows all), and off what
// this machine or a local cluster has no use for (Envoy, health probes,
// Hubble, the bandwidth manager (no fq qdisc here), encryption, gops).
// policy-default-local-cluster is off, so that a NetworkPolicy peer means
// what upstream's API says: on (Cilium's default), the agent gives a peer's
// nil podSelector its cluster's label, and an ipBlock-only peer then selects
// every pod of the policy's namespace as well as the block. A local cluster
// has no cluster mesh for that label to tell apart.
func ciliumAgentArgs(n node, kubeconfig string, kpr, policy bool) []string {
	enforce := "never"
	if policy {
		enforce = "default"
	}
	return []string{
		"--k8s-kubeconfig-path=" + kubeconfig,
		"--ipam=kubernetes", "--identity-allocation-mode=crd",
		"--enable-ipv4=true", "--enable-ipv6=false",
		"--devices=" + uplink, "--direct-routing-device=" + uplink,
		"--routing-mode=native", "--ipv4-native-routing-cidr=" + clusterCIDR.String(), "--auto-direct-node-routes=true",
		fmt.Sprintf("--kube-proxy-replacement=%t", kpr),
		// Into its run directory, not the node's CNI directory: the agent
		// writes a temporary file and renames it, and containerd 1.6's
		// watcher of that directory reloads on the temporary file's
		// removal, finds nothing, and never sees the renamed file.
		"--write-cni-conf-when-ready=" + filepath.Join(n.dir, ciliumRunDir, ciliumConflist),
		"--cni-log-file=" + filepath.Join(n.dir, ciliumRunDir, "cilium-cni.log"),
		"--bpf-root=" + filepath.Join(n.dir, ciliumBPFFS),
		"--cgroup-root=" + ciliumCgroupMount,
		"--lib-dir=" + filepath.Join(n.dir, ciliumLibDir),
		"--enable-policy=" + enforce, "--policy-default-local-cluster=false",
		"--enable-l7-proxy=false", "--enable-health-checking=false", "--enable-endpoint-health-checking=false",
		"--enable-hubble=false", "--enable-bandwidth-manager=false", "--enable-ipsec=false", "--enable-wireguard=false",
		"--enable-gops=false",
	}
}

// CiliumDbg runs cilium-dbg against node's agent (its API socket in the
// node's run directory) and returns its output.
func CiliumDbg(ctx context.Context, st *lab.State, node string, args ...string) ([]byte, error) {
	dir, err := binaries.EnsureCilium(ctx, func(string, ...any) {})
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(lab.Dir(st.Name), node, ciliumRunDir, "cilium.sock")
	c := proc.Command(ctx, "", filepath.Join(dir, binaries.CiliumDbg), append([]string{"--host", "unix://" + sock}, args...)...)
	return c.Output()
}

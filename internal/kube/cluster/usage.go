package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/kube/netpolicy"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
)

// The daemons of a local cluster whose use `kube converge` records.
const (
	RoleEtcd      = "etcd"
	RoleAPIServer = "kube-apiserver"
	RoleProxy     = "proxy" // a node's Service proxy: kube-proxy, or vnetlab's
	// RoleNetpol is a node's NetworkPolicy controller: vnetlab kube-netpol
	// (a node daemon), or kube-router's (a pod of its DaemonSet).
	RoleNetpol = "netpol"
)

// Daemon is one running daemon of a local cluster.
type Daemon struct {
	Role string
	Node string // a proxy's node
	PID  int
}

// Name is how results name it: "etcd", "kube-apiserver", "NODE proxy".
func (d Daemon) Name() string {
	if d.Node != "" {
		return d.Node + " " + d.Role
	}
	return d.Role
}

// Daemons lists cluster name's running etcd, API server, node proxies and
// policy controllers, found by their command lines among its processes
// (lab.Procs) and, for kube-router's controller, in its nodes' cgroups.
// A Cilium agent is listed once for each role it plays (ciliumRoles).
func Daemons(name string) ([]Daemon, error) {
	var out []Daemon
	for _, pid := range lab.Procs(name) {
		if d, ok := daemonAt(pid); ok {
			d.PID = pid
			out = append(out, d)
		}
		for _, d := range ciliumRoles(cmdline(pid)) {
			d.PID = pid
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cluster %s: no running etcd, API server or proxy in its journal", name)
	}
	out = append(out, podControllers(name)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// podControllers are the policy controllers running as pods on cluster
// name's nodes (kube-router's), each found in its node's cgroup tree.
func podControllers(name string) []Daemon {
	st, err := Load(name)
	if err != nil {
		return nil
	}
	root, err := cgroup.Root()
	if err != nil {
		return nil
	}
	var out []Daemon
	for _, n := range st.Nodes {
		_ = filepath.WalkDir(filepath.Join(root, NodeCgroupPath(n.Name)), func(path string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			pids, _ := cgroup.Procs(path)
			for _, pid := range pids {
				if d, ok := daemonAt(pid); ok && d.Role == RoleNetpol {
					d.Node, d.PID = n.Name, pid
					out = append(out, d)
				}
			}
			return nil
		})
	}
	return out
}

// ProxyPIDs are local cluster name's node proxies' PIDs, by node.
func ProxyPIDs(name string) map[string]int {
	out := map[string]int{}
	ds, _ := Daemons(name)
	for _, d := range ds {
		if d.Role == RoleProxy {
			out[d.Node] = d.PID
		}
	}
	return out
}

// daemonAt names process pid as daemonOf does, from its command line.
func daemonAt(pid int) (Daemon, bool) {
	argv := cmdline(pid)
	if argv == nil {
		return Daemon{}, false
	}
	return daemonOf(argv)
}

// cmdline is process pid's arguments (nil when it is gone).
func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
}

// ciliumRoles are the roles of a Cilium agent (argv as ciliumAgentArgs
// makes it; none for another process): its node's Service proxy with its
// kube-proxy replacement, and its policy controller unless enforcement is
// off. It stays out of daemonOf, which kube set-proxy reads to stop a
// node's proxies: the agent is the cluster's CNI too, and set-proxy
// refuses a Cilium cluster.
func ciliumRoles(argv []string) []Daemon {
	if len(argv) == 0 || filepath.Base(argv[0]) != binaries.CiliumAgent {
		return nil
	}
	node := filepath.Base(filepath.Dir(flagOf(argv, "--bpf-root")))
	var out []Daemon
	if flagOf(argv, "--kube-proxy-replacement") == "true" {
		out = append(out, Daemon{Role: RoleProxy, Node: node})
	}
	if flagOf(argv, "--enable-policy") != "never" {
		out = append(out, Daemon{Role: RoleNetpol, Node: node})
	}
	return out
}

// daemonOf names a daemon by its arguments (as startProxy and the control
// plane start them): etcd, kube-apiserver, kube-proxy --config
// DIR/NODE/kube-proxy.yaml, vnetlab kube-proxy ... --node NODE.
func daemonOf(argv []string) (Daemon, bool) {
	switch base := filepath.Base(argv[0]); {
	case base == RoleEtcd || base == RoleAPIServer:
		return Daemon{Role: base}, true
	case base == "kube-proxy":
		return Daemon{Role: RoleProxy, Node: filepath.Base(filepath.Dir(flagOf(argv, "--config")))}, true
	case len(argv) > 1 && argv[1] == "kube-proxy":
		return Daemon{Role: RoleProxy, Node: flagOf(argv, "--node")}, true
	case base == kubeRouterName: // a pod's: its node is the cgroup's (podControllers)
		return Daemon{Role: RoleNetpol}, true
	case len(argv) > 1 && argv[1] == "kube-netpol":
		return Daemon{Role: RoleNetpol, Node: flagOf(argv, "--node")}, true
	}
	return Daemon{}, false
}

// PlaneMapBytes is the memory the kernel charges for the eBPF maps pinned
// in the nodes' Service planes of cluster name (vnetlab's proxies; none for
// kube-proxy's), summed over nodes: each map's memlock (bpf_map_info), by
// the part of the data path it serves (mapPart). Under kube-proxy (a
// cluster switched to it on veth-ebpf, kube set-proxy) the Service maps
// left in the CNI's plane are the CNI's, read by its programs and filled
// by no proxy: counted as its routing's, the proxy's part 0.
func PlaneMapBytes(name string) (map[string]int64, error) {
	st, err := Load(name)
	if err != nil {
		return nil, err
	}
	vnetlabProxy := clusternet.IsVnetlab(Network(st).Proxy)
	parts := map[string]int64{}
	for _, n := range st.Nodes {
		dir := filepath.Join(lab.BPFRoot, ProxyPlane(name, n.Name))
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
			if err != nil {
				return nil // a pinned program or link
			}
			defer m.Close()
			if info, err := m.Info(); err == nil {
				if b, ok := info.Memlock(); ok {
					rel, _ := filepath.Rel(dir, path)
					part := mapPart(rel)
					if part == results.MapPartProxy && !vnetlabProxy {
						part = results.MapPartRouting
					}
					parts[part] += int64(b)
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return parts, err
		}
	}
	if len(parts) > 0 && !vnetlabProxy {
		parts[results.MapPartProxy] = 0
	}
	return parts, nil
}

// mapPart is the part of a node's data path the map pinned at rel (in the
// node's plane) serves, by its name in bpf/: lb*, np* (lb*.h, nodeport*.h)
// and sock* (sock*.h) the proxy's; host*, pod_routes* (host*.h) the CNI's
// routing; the policy folder (netpolicy.PolicyDir: policy*.h's maps) the
// enforcer's.
func mapPart(rel string) string {
	if strings.HasPrefix(rel, netpolicy.PolicyDir+string(filepath.Separator)) {
		return results.MapPartPolicy
	}
	switch name := filepath.Base(rel); {
	case strings.HasPrefix(name, "lb"), strings.HasPrefix(name, "np"), strings.HasPrefix(name, "sock"):
		return results.MapPartProxy
	case strings.HasPrefix(name, "host"), strings.HasPrefix(name, "pod_routes"):
		return results.MapPartRouting
	}
	return results.MapPartOther
}

// flagOf is flag name's value in argv, given as "name value" or
// "name=value" ("" when it is not there).
func flagOf(argv []string, name string) string {
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			return argv[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

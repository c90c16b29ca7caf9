package measure

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Options say what to set up in the cluster.
type Options struct {
	Kubeconfig, Context string
	Paths               []string // pod, service, host
	Placements          []string // same-node, cross-node
	Nodes               []string // server node, client node for cross-node; "" = pick
	Image               string
	PullPolicy          corev1.PullPolicy
	ReadyTimeout        time.Duration // how long the pods may take to be Ready (0: DefaultReadyTimeout)
	// NodeCPUPods: a hostNetwork helper pod on each node, whose /proc/stat
	// Session.NodeCPU reads (nodecpu.go).
	NodeCPUPods bool
	// Family (--ip-family) picks the pods' podIPs and the Service's
	// clusterIPs of that family; dual measures each, as two cells.
	Family family.Family
}

// The paths and placements a cluster run knows, in table order.
var (
	Paths      = []string{PathPod, PathService, PathHost}
	Placements = []string{SameNode, CrossNode}
)

// CheckPath refuses a path a cluster run does not know.
func CheckPath(p string) error {
	if !slices.Contains(Paths, p) {
		return fmt.Errorf("unknown path %q for a cluster (known: %s)", p, strings.Join(Paths, ", "))
	}
	return nil
}

// CheckPlacement refuses an unknown placement.
func CheckPlacement(p string) error {
	if !slices.Contains(Placements, p) {
		return fmt.Errorf("unknown placement %q (known: %s)", p, strings.Join(Placements, ", "))
	}
	return nil
}

// Validate refuses unknown paths and placements before the cluster is touched.
func (o Options) Validate() error {
	for _, p := range o.Paths {
		if err := CheckPath(p); err != nil {
			return err
		}
	}
	for _, p := range o.Placements {
		if err := CheckPlacement(p); err != nil {
			return err
		}
	}
	if len(o.Paths) == 0 || len(o.Placements) == 0 {
		return fmt.Errorf("give at least one path and one placement")
	}
	if len(o.Nodes) > 2 {
		return field.Errorf("nodes", "{nodes} names at most two nodes: the server's and the cross-node client's")
	}
	return nil
}

// Endpoint is one measured path: who dials whom, where they run, over
// which IP family.
type Endpoint struct {
	Path, Placement        string
	ServerPod, ClientPod   string
	ServerNode, ClientNode string
	Addr                   string
	Family                 family.Family
}

// Session is a set-up namespace in a cluster; Close deletes it.
type Session struct {
	Client    *kubernetes.Clientset
	Config    *rest.Config
	Namespace string
	Version   string
	Nodes     []corev1.Node
	Endpoints []Endpoint
	Exec      *Exec
	// background are the processes the session keeps running in its pods
	// (Listen's), ended by Close.
	background []*PodProcess
}

// Close ends the session's background processes and deletes its
// namespace (also after Ctrl-C).
func (s *Session) Close() error {
	if s == nil || s.Namespace == "" {
		return nil
	}
	for _, p := range s.background {
		p.Kill()
	}
	return DeleteNamespace(s.Client, s.Namespace)
}

// Setup checks the cluster, creates the namespace, pods and Services, and
// waits until the pods run. On failure the namespace is already deleted.
func Setup(ctx context.Context, o Options, say func(string, ...any)) (*Session, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cs, cfg, version, err := ConnectChecked(ctx, o.Kubeconfig, o.Context)
	if err != nil {
		return nil, err
	}
	nodes, err := PickNodes(ctx, cs, o.Nodes, slices.Contains(o.Placements, CrossNode))
	if err != nil {
		return nil, err
	}
	s := &Session{Client: cs, Config: cfg, Version: version, Nodes: nodes}
	if s.Namespace, err = CreateNamespace(ctx, cs); err != nil {
		return nil, err
	}
	s.Exec = &Exec{Client: cs, Config: cfg, Namespace: s.Namespace}
	if err := s.populate(ctx, o, say); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Pod names: a server on the first node, a client beside it and one on the
// second node; "host-" pods are the hostNetwork pair.
func podName(host bool, role string) string {
	if host {
		return "host-" + role
	}
	return role
}

func (s *Session) populate(ctx context.Context, o Options, say func(string, ...any)) error {
	server := s.Nodes[0].Name
	clientOn := map[string]string{SameNode: server}
	if len(s.Nodes) > 1 {
		clientOn[CrossNode] = s.Nodes[1].Name
	}
	var specs []PodSpec
	hosts := []bool{}
	if slices.Contains(o.Paths, PathPod) || slices.Contains(o.Paths, PathService) {
		hosts = append(hosts, false)
	}
	if slices.Contains(o.Paths, PathHost) {
		hosts = append(hosts, true)
	}
	for _, h := range hosts {
		specs = append(specs, PodSpec{Name: podName(h, "server"), Node: server, HostNetwork: h, Server: !h})
		for _, pl := range o.Placements {
			// hostNetwork pods of one node share its namespace: one client there.
			specs = append(specs, PodSpec{Name: podName(h, "client-"+pl), Node: clientOn[pl], HostNetwork: h})
		}
	}
	if o.NodeCPUPods {
		specs = append(specs, s.nodeCPUPods()...)
	}
	say("namespace %s: %d pods on %s", s.Namespace, len(specs), strings.Join(nodeNames(s.Nodes), ", "))
	var names []string
	for _, p := range specs {
		if err := CreatePod(ctx, s.Client, s.Namespace, o.Image, o.PullPolicy, p); err != nil {
			return err
		}
		names = append(names, p.Name)
	}
	var clusterIPs []string
	if slices.Contains(o.Paths, PathService) {
		var err error
		if clusterIPs, err = CreateService(ctx, s.Client, s.Namespace, podName(false, "server"), o.Family); err != nil {
			return err
		}
	}
	pods, err := WaitReady(ctx, s.Client, s.Namespace, names, o.Image, o.ReadyTimeout)
	if err != nil {
		return err
	}
	for _, path := range o.Paths {
		for _, pl := range o.Placements {
			host := path == PathHost
			srv, cli := pods[podName(host, "server")], pods[podName(host, "client-"+pl)]
			// A cell per family, next to each other (the rounds interleave them).
			for _, f := range o.Family.Measured() {
				addr, err := podAddr(srv, f)
				if path == PathService {
					addr, err = serviceAddr(srv.Name, clusterIPs, f)
				}
				if err != nil {
					return err
				}
				s.Endpoints = append(s.Endpoints, Endpoint{Path: path, Placement: pl, ServerPod: srv.Name, ClientPod: cli.Name,
					ServerNode: srv.Spec.NodeName, ClientNode: cli.Spec.NodeName, Addr: addr, Family: f})
			}
		}
	}
	return nil
}

// podAddr is p's address of family f, or what the cluster lacks.
func podAddr(p *corev1.Pod, f family.Family) (string, error) {
	var all []string
	for _, ip := range p.Status.PodIPs {
		if family.OfString(ip.IP) == f {
			return ip.IP, nil
		}
		all = append(all, ip.IP)
	}
	return "", fmt.Errorf("--ip-family: pod %s has no %s address (podIPs %s): the cluster's pods are not %s (a local cluster: vnetlab kube up --ip-family dual)",
		p.Name, f, strings.Join(all, ", "), f)
}

// serviceAddr is the Service's ClusterIP of family f, or what the cluster
// lacks.
func serviceAddr(name string, clusterIPs []string, f family.Family) (string, error) {
	for _, ip := range clusterIPs {
		if family.OfString(ip) == f {
			return ip, nil
		}
	}
	return "", fmt.Errorf("--ip-family: Service %s has no %s ClusterIP (clusterIPs %s): the cluster's Service range has no %s (kube-apiserver --service-cluster-ip-range; a local cluster: vnetlab kube up --ip-family dual)",
		name, f, strings.Join(clusterIPs, ", "), f)
}

func nodeNames(ns []corev1.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

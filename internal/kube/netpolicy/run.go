package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/system/kernel"
)

// Component is the controller's name in the Events it posts.
const Component = "vnetlab-netpol"

// Config is one node's policy controller.
type Config struct {
	Kubeconfig string
	Node       string // the node's Kubernetes name: its pods are those whose spec.nodeName it is
	// Plane is the node's eBPF plane (tcbpf; kube up's ProxyPlane): set, the
	// eBPF backend enforces on the pods' interfaces (CNI mode veth-ebpf),
	// finding their namespaces under ContainerdState; "": nftables.
	Plane, ContainerdState string
	Logf                   func(string, ...any)
}

// Run follows the API server and keeps the node's policy rules in step
// until ctx ends. It runs in the node's network namespace and writes the
// rules there (nftables), or in the node's eBPF plane and on its pods'
// interfaces (Plane). The rules stay when it returns (a restarted
// controller writes them again at its first sync); the namespace's removal
// takes them, and kube down the node's pin directory.
func Run(ctx context.Context, c Config) error {
	logf := c.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", c.Kubeconfig, err)
	}
	// Informers only watch: the default client rate limit would slow the
	// first listing.
	rc.QPS, rc.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component, Host: c.Node})

	backend := NewNFTables("")
	if c.Plane != "" {
		if c.ContainerdState == "" {
			return errors.New("the eBPF backend (--plane) needs --containerd-state (where the node's pods' namespaces are mounted)")
		}
		b, err := NewEBPF(c.Plane, c.ContainerdState)
		if err != nil {
			return err
		}
		backend = b
	}
	if cl, ok := backend.(io.Closer); ok {
		defer cl.Close()
	}
	ctl := NewController(c.Node, backend, Unsupported(), func(p *networkingv1.NetworkPolicy, reason, msg string) {
		recorder.Event(p, corev1.EventTypeWarning, reason, msg)
	}, logf)

	factory := informers.NewSharedInformerFactory(cs, 0)
	defer factory.Shutdown()
	var synced []cache.InformerSynced
	for _, h := range []struct {
		inf     cache.SharedIndexInformer
		handler cache.ResourceEventHandler
	}{
		{factory.Networking().V1().NetworkPolicies().Informer(), ctl.PolicyHandler()},
		{factory.Core().V1().Pods().Informer(), ctl.PodHandler()},
		{factory.Core().V1().Namespaces().Informer(), ctl.NamespaceHandler()},
	} {
		reg, err := h.inf.AddEventHandler(h.handler)
		if err != nil {
			return err
		}
		synced = append(synced, reg.HasSynced)
	}
	start := time.Now()
	factory.Start(ctx.Done())
	// Synced once each handler has seen the whole first listing: the first
	// Sync isolates every pod a policy selects, none is left open.
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("%w: %v", errNotSynced, ctx.Err())
	}
	st, err := ctl.Sync()
	if err != nil {
		logf("first sync: %v (retrying)", err)
		ctl.kick.Now() // Loop retries it, with its backoff, without waiting for a change
	} else {
		logf("node %s: %s: %d policies, %d pods (%d here, %d isolated) in force %s after start", c.Node, backend.Name(), st.Policies, st.Pods, st.Local, st.Isolated, time.Since(start).Round(time.Millisecond))
	}
	ctl.Loop(ctx)
	return nil
}

// Unsupported are the protocols this kernel cannot enforce, each with why:
// SCTP without CONFIG_IP_SCTP (the nodes share this machine's kernel).
func Unsupported() map[netpol.Proto]string {
	out := map[netpol.Proto]string{}
	if err := kernel.Check(kernel.SCTP); err != nil {
		out[netpol.SCTP] = err.Error()
	}
	return out
}

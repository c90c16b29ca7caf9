package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
)

// etcdDir is etcd's data directory in the cluster's directory: a tmpfs of
// its own (the lab's teardown unmounts it). A local cluster is thrown
// away, and its writes should not wait for a disk: etcd syncs its log on
// every write, and where /run is on a disk, that sync was most of an API
// write's time (docs/kubernetes.md, "A local cluster").
const etcdDir = "etcd"

// etcdData mounts the tmpfs etcd keeps its data in, and returns its path.
func (b *builder) etcdData() (string, error) {
	dir := filepath.Join(b.dir, etcdDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700"); err != nil {
		return "", fmt.Errorf("mount a tmpfs for etcd's data on %s: %w", dir, err)
	}
	return dir, nil
}

func (b *builder) startControlPlane(ns string) error {
	b.say("control plane: etcd, kube-apiserver; then kube-controller-manager, kube-scheduler")
	etcd, _ := exec.LookPath("etcd")
	data, err := b.etcdData()
	if err != nil {
		return err
	}
	if err := b.daemon(ns, "etcd", etcd, "--name", "etcd", "--data-dir", data,
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "etcd=http://127.0.0.1:2380"); err != nil {
		return err
	}
	p := b.pki
	if err := b.daemon(ns, "kube-apiserver", b.k8s(binaries.APIServer),
		"--etcd-servers", "http://127.0.0.1:2379", "--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(apiPort),
		"--advertise-address", b.addrs.apiAddress().String(), "--service-cluster-ip-range", b.addrs.serviceCIDRs(),
		"--cert-dir", filepath.Join(b.dir, "apiserver"),
		"--tls-cert-file", p.path("apiserver.crt"), "--tls-private-key-file", p.path("apiserver.key"),
		"--client-ca-file", p.path("ca.crt"), "--token-auth-file", p.path("tokens.csv"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", p.path("sa.pub"), "--service-account-signing-key-file", p.path("sa.key"),
		"--authorization-mode", "RBAC", "--allow-privileged",
		// kubectl exec/logs: reach kubelets by address (node names do not resolve).
		"--kubelet-preferred-address-types", "InternalIP", "--profiling=false"); err != nil {
		return err
	}
	return nil
}

// startControllers starts the controller-manager and the scheduler once the
// API server answers (they exit when it refuses their first request).
func (b *builder) startControllers(kubeconfig string) error {
	p := b.pki
	ns := b.l.State.Ext
	common := []string{"--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		"--leader-elect=false", "--bind-address", "127.0.0.1", "--profiling=false"}
	if err := b.daemon(ns, "kube-controller-manager", b.k8s(binaries.ControllerManager), append(common,
		"--service-account-private-key-file", p.path("sa.key"), "--root-ca-file", p.path("ca.crt"),
		// Node pod ranges are the CNI configuration's, not allocated here.
		"--allocate-node-cidrs=false", "--use-service-account-credentials=false")...); err != nil {
		return err
	}
	return b.daemon(ns, "kube-scheduler", b.k8s(binaries.Scheduler), common...)
}

package cluster

import (
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
)

func (b *builder) startControlPlane(ns string) error {
	b.say("control plane: etcd, kube-apiserver; then kube-controller-manager, kube-scheduler")
	etcd, _ := exec.LookPath("etcd")
	if err := b.daemon(ns, "etcd", etcd, "--name", "etcd", "--data-dir", filepath.Join(b.dir, "etcd"),
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

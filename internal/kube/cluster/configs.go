package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"text/template"
)

// The configuration files of a local cluster, as templates over one node's
// (or the cluster's) settings. Each setting that differs from the daemon's
// default says why in a comment next to it.

var kubeconfigTmpl = template.Must(template.New("kubeconfig").Parse(`apiVersion: v1
kind: Config
clusters:
- name: {{.Cluster}}
  cluster:
    server: {{.Server}}
    certificate-authority: {{.CA}}
users:
- name: admin
  user:
    token: {{.Token}}
contexts:
- name: {{.Cluster}}
  context: {cluster: {{.Cluster}}, user: admin}
current-context: {{.Cluster}}
`))

// containerdState is node n's containerd state directory (containerdTmpl's
// state): the pods' network namespaces are mounted under it.
func containerdState(n node) string { return filepath.Join(n.dir, "containerd", "state") }

// containerd 1.6 (config version 2): everything per node, so that several
// containerds share the machine.
var containerdTmpl = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Dir}}/containerd/root"
state = "{{.Dir}}/containerd/state"
[grpc]
  address = "{{.Dir}}/containerd/containerd.sock"
[ttrpc]
  address = "{{.Dir}}/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Dir}}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.Image}}"
  # This VM's bounding set lacks CAP_SYS_RESOURCE: runc cannot lower a
  # sandbox's oom_score_adj to -998 and every pod would fail to start.
  restrict_oom_score_adj = true
  # Pod network namespaces under this node's state, not the machine's /run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{.Dir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.Dir}}/cni"
`))

// CNI: a bridge per node with host-local addresses from the node's pod ranges,
// one per family, and a default route of each (its state kept per node: the
// default directory is machine-wide).
var cniTmpl = template.Must(template.New("cni").Parse(`{
  "cniVersion": "0.4.0",
  "name": "vnetlab",
  "plugins": [
    {"type": "bridge", "bridge": "{{.Bridge}}", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "{{.Dir}}/cni-ipam",
              "ranges": {{.Ranges}}, "routes": {{.Routes}}}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`))

var kubeletTmpl = template.Must(template.New("kubelet").Parse(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The host is cgroup v1 (hybrid): 1.37 refuses it unless told; cgroupfs with a
# cgroup root per node, made by vnetlab in every v1 hierarchy.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {{.CgroupRoot}}
containerRuntimeEndpoint: unix://{{.Dir}}/containerd/containerd.sock
# A local test cluster: the API server reaches kubelets without credentials.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
address: {{.IP}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
podLogsDir: {{.Dir}}/pod-logs
resolvConf: ""
failSwapOn: false
serializeImagePulls: false
# A small disk must not evict the measuring pods.
evictionHard: {memory.available: "1%", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Pods (dnsPolicy ClusterFirst) resolve through the kube-dns Service.
clusterDNS: [{{.DNS}}]
clusterDomain: {{.Domain}}
`))

var kubeProxyTmpl = template.Must(template.New("kube-proxy").Parse(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: {{.Kubeconfig}}}
hostnameOverride: {{.Node}}
mode: {{.Proxy}}
clusterCIDR: {{.ClusterCIDR}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Leave nf_conntrack_max and the hash size alone (machine-wide) and the
# established timeout; set the CLOSE_WAIT timeout to kube-proxy's default,
# which is per network namespace (the node's), as vnetlab's proxy does.
# Keep the default oom_score_adj (this VM cannot lower it).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 1h0m0s}
oomScoreAdj: 0
`))

func writeTemplate(path string, t *template.Template, data any) error {
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

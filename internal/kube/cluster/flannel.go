package cluster

// flannel as users run it (kube up --cni flannel): flanneld, built from its
// Go module (internal/kube/binaries), runs on every node as a DaemonSet from
// an image vnetlab builds, with the kube subnet manager and the node's
// podCIDR (set by vnetlab: the controller-manager allocates none). flannel's
// CNI plugin cannot be fetched here (its module is not on the proxy), so each
// node's CNI configuration is the bridge + host-local configuration that
// plugin generates, written from the node's subnet.env once flanneld wrote it.
//
// /run/flannel is per node: the DaemonSet mounts the cluster's directory
// flannel-run/<node name> (a hostPath with a subPathExpr on the node's name)
// at /run/flannel in the container, so flanneld keeps its default path and
// no node writes the machine's /run/flannel. Everything else flanneld makes
// (flannel.1, routes, FDB and neighbour entries, its iptables chains) lives in
// the node's namespace and goes with it at teardown.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/vocab/clusternet"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

const (
	flannelName      = "flannel"
	flannelNamespace = "kube-flannel"
	flannelConfig    = "kube-flannel-cfg"
	// flannelRunDir (in the cluster's directory) holds each node's
	// /run/flannel, as flannelRunDir/<node name>.
	flannelRunDir = "flannel-run"
	// flanneldPath is where flannel's images keep flanneld.
	flanneldPath = "/opt/bin/flanneld"
	// subnetEnv is the file flanneld writes in /run/flannel.
	subnetEnv = "subnet.env"
	// flannelWait bounds the wait for a node's subnet.env.
	flannelWait = 2 * time.Minute
)

// validateFlannel checks --cni flannel's options.
func (s Spec) validateFlannel() error {
	if s.CNIMode != "" {
		return field.Errorf("cni_mode", "{cni_mode} %s: modes are vnetlab's plugin's; flannel's data path is its backend: use {flannel_backend} %s", s.CNIMode, strings.Join(clusternet.FlannelBackends, "|"))
	}
	for _, b := range clusternet.FlannelBackends {
		if s.flannelBackend() == b {
			return nil
		}
	}
	return field.Errorf("flannel_backend", "{flannel_backend} %q: flannel's backends here are %s", s.FlannelBackend, strings.Join(clusternet.FlannelBackends, ", "))
}

func (s Spec) flannelBackend() string {
	if s.FlannelBackend == "" {
		return clusternet.FlannelBackends[0]
	}
	return s.FlannelBackend
}

// iptablesPrograms are the names flanneld runs iptables by (the iptables
// manager; its start also cleans the other manager's rules), all one
// program: xtables-nft-multi dispatches on its name.
var iptablesPrograms = []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"}

const (
	xtablesMulti = "/usr/sbin/xtables-nft-multi"
	// xtablesModules are iptables' extensions (loaded by name, so ldd
	// does not list them).
	xtablesModules = "/usr/lib/x86_64-linux-gnu/xtables"
)

// flannelImage builds flanneld (first time only) and its image archive, kept
// beside the binary: flanneld and the machine's iptables (nf_tables
// backend) with its extensions and shared libraries.
func flannelImage(ctx context.Context, say func(string, ...any)) (ref, tarPath string, err error) {
	return builtImage(ctx, say, binaries.EnsureFlannel, "vnetlab.local/flannel:"+binaries.FlannelBuild(), flannelContent)
}

// builtImage builds a program from its Go module (ensure: first time only)
// and its image archive (content), kept beside the binary, and returns the
// image's reference ref and the archive.
func builtImage(ctx context.Context, say func(string, ...any), ensure func(context.Context, func(string, ...any)) (string, error),
	ref string, content func(ref, bin string) (*image.Image, error)) (string, string, error) {
	bin, err := ensure(ctx, say)
	if err != nil {
		return "", "", err
	}
	tarPath, err := cachedImage(bin, func() (*image.Image, error) { return content(ref, bin) })
	return ref, tarPath, err
}

// flannelContent is flannel's image: flanneld (bin) as the entrypoint, the
// iptables programs by their names and what they load.
func flannelContent(ref, bin string) (*image.Image, error) {
	c := image.Content{Files: map[string]string{flanneldPath: bin}, Links: map[string]string{}, Entrypoint: []string{flanneldPath}}
	progs, err := addIPTables(&c, "flannel")
	if err != nil {
		return nil, err
	}
	c.AddLibraries(progs...)
	img, _, err := image.Assemble(c)
	if err != nil {
		return nil, err
	}
	img.Ref = ref
	return img, nil
}

// addIPTables puts the machine's iptables (nf_tables backend) in an image
// (who: whose image, for the error): xtables-nft-multi under each of its
// programs' names and the extensions it loads. It returns the files whose
// shared libraries the image needs.
func addIPTables(c *image.Content, who string) ([]string, error) {
	if _, err := exec.LookPath(xtablesMulti); err != nil {
		return nil, fmt.Errorf("%s's image needs iptables with the nf_tables backend (%s): install Debian's iptables", who, xtablesMulti)
	}
	c.Files["/usr/bin/xtables-nft-multi"] = xtablesMulti
	for _, p := range iptablesPrograms {
		c.Links["/usr/bin/"+p] = "xtables-nft-multi"
	}
	mods, err := filepath.Glob(filepath.Join(xtablesModules, "*.so"))
	if err != nil {
		return nil, err
	}
	progs := []string{"/usr/bin/xtables-nft-multi"}
	for _, m := range mods {
		c.Files[m] = m
		progs = append(progs, m)
	}
	return progs, nil
}

// netConf is flannel's net-conf.json: the cluster's pod range and the backend.
func netConf(backend string) string {
	b, _ := json.Marshal(map[string]any{"Network": clusterCIDR.String(), "Backend": map[string]string{"Type": backend}})
	return string(b)
}

// createFlannel creates flannel's objects as its manifest does: a
// namespace, a ServiceAccount with the rights the kube subnet manager needs,
// net-conf.json and the DaemonSet. runDir is the hostPath holding each
// node's /run/flannel.
func createFlannel(ctx context.Context, cs kubernetes.Interface, ref, backend, runDir string) error {
	labels := map[string]string{"app": flannelName}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: flannelNamespace}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: flannelName, Namespace: flannelNamespace}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: flannelName}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: flannelName},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: flannelName, Namespace: flannelNamespace}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: flannelConfig, Namespace: flannelNamespace, Labels: labels},
		Data: map[string]string{"net-conf.json": netConf(backend)}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-flannel-ds", Namespace: flannelNamespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: flannelPod(ref, runDir)}}}
	return createAll("flannel",
		create(ctx, "Namespace", cs.CoreV1().Namespaces(), ns),
		create(ctx, "ServiceAccount", cs.CoreV1().ServiceAccounts(flannelNamespace), sa),
		create(ctx, "ClusterRole", cs.RbacV1().ClusterRoles(), role),
		create(ctx, "ClusterRoleBinding", cs.RbacV1().ClusterRoleBindings(), binding),
		create(ctx, "ConfigMap", cs.CoreV1().ConfigMaps(flannelNamespace), cm),
		create(ctx, "DaemonSet", cs.AppsV1().DaemonSets(flannelNamespace), ds))
}

// flannelPod is flanneld's pod: the node's network (hostNetwork: the node's
// namespace), NET_ADMIN and NET_RAW (not privileged: this VM refuses
// privileged pods), its node's /run/flannel and net-conf.json.
func flannelPod(ref, runDir string) corev1.PodSpec {
	no := false
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return corev1.PodSpec{
		ServiceAccountName: flannelName,
		PriorityClassName:  "system-node-critical",
		HostNetwork:        true,
		// It must run on nodes that are not Ready yet: it is what makes them Ready.
		Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		TerminationGracePeriodSeconds: new(int64(5)),
		Containers: []corev1.Container{{
			Name: "kube-flannel", Image: ref, ImagePullPolicy: corev1.PullNever,
			Command: []string{flanneldPath}, Args: []string{"--ip-masq", "--kube-subnet-mgr"},
			Env: []corev1.EnvVar{
				fieldEnv("POD_NAME", "metadata.name"), fieldEnv("POD_NAMESPACE", "metadata.namespace"),
				fieldEnv("NODE_NAME", "spec.nodeName"),
				{Name: "EVENT_QUEUE_DEPTH", Value: "5000"},
				// The API server directly, not through the kubernetes
				// Service: flanneld must not wait for the node's proxy.
				{Name: "KUBERNETES_SERVICE_HOST", Value: apiIP.String()},
				{Name: "KUBERNETES_SERVICE_PORT", Value: strconv.Itoa(apiPort)},
			},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("50Mi")}},
			SecurityContext: &corev1.SecurityContext{Privileged: &no,
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "run", MountPath: "/run/flannel", SubPathExpr: "$(NODE_NAME)"},
				{Name: "flannel-cfg", MountPath: "/etc/kube-flannel/", ReadOnly: true},
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "run", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: runDir, Type: &dirOrCreate}}},
			{Name: "flannel-cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: flannelConfig}}}},
		},
	}
}

// setPodCIDR gives node n its pod range once kubelet has registered it:
// flannel's kube subnet manager takes the node's lease from spec.podCIDR.
func setPodCIDR(ctx context.Context, cs kubernetes.Interface, n node) error {
	patch := fmt.Sprintf(`{"spec":{"podCIDR":%q,"podCIDRs":[%q]}}`, n.pods, n.pods)
	var last error
	err := waitFor(ctx, time.Minute, "node "+n.name+" to register (to set its podCIDR)", func() bool {
		_, last = cs.CoreV1().Nodes().Patch(ctx, n.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return last == nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w: %v", err, last)
	}
	return err
}

// flannelSubnet is what flanneld wrote in a node's subnet.env.
type flannelSubnet struct {
	Network, Subnet *net.IPNet
	MTU             int
	IPMasq          bool
}

// parseSubnetEnv reads subnet.env (FLANNEL_NETWORK, FLANNEL_SUBNET,
// FLANNEL_MTU, FLANNEL_IPMASQ; lines KEY=VALUE).
func parseSubnetEnv(text string) (flannelSubnet, error) {
	var s flannelSubnet
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		var err error
		switch k {
		case "FLANNEL_NETWORK":
			_, s.Network, err = net.ParseCIDR(v)
		case "FLANNEL_SUBNET":
			// flanneld writes the gateway's address (10.244.1.1/24);
			// host-local refuses a subnet with host bits set, and
			// flannel's plugin hands it the network (10.244.1.0/24).
			_, s.Subnet, err = net.ParseCIDR(v)
		case "FLANNEL_MTU":
			s.MTU, err = strconv.Atoi(v)
		case "FLANNEL_IPMASQ":
			s.IPMasq, err = strconv.ParseBool(v)
		default:
			continue
		}
		if err != nil {
			return s, fmt.Errorf("%s=%s: %v", k, v, err)
		}
		seen[k] = true
	}
	for _, k := range []string{"FLANNEL_NETWORK", "FLANNEL_SUBNET", "FLANNEL_MTU", "FLANNEL_IPMASQ"} {
		if !seen[k] {
			return s, fmt.Errorf("no %s", k)
		}
	}
	return s, nil
}

// flannelConflist is the configuration flannel's CNI plugin generates from
// subnet.env with its manifest's delegate options (hairpinMode,
// isDefaultGateway): a bridge (cni0, the bridge plugin's default) as the
// pods' gateway, masquerading only when flanneld does not, the flannel MTU,
// host-local addresses from the node's subnet with a route to the whole
// network. One difference: host-local keeps its state in ipamDir, per node
// (its default directory is machine-wide).
func flannelConflist(s flannelSubnet, ipamDir string) ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.3.1",
		"name":       "cbr0",
		"plugins": []any{
			map[string]any{"type": "bridge", "mtu": s.MTU, "ipMasq": !s.IPMasq, "isGateway": true,
				"hairpinMode": true, "isDefaultGateway": true,
				"ipam": map[string]any{"type": "host-local", "subnet": s.Subnet.String(), "dataDir": ipamDir,
					"routes": []map[string]string{{"dst": s.Network.String()}}}},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// writeFlannelCNI waits for flanneld's subnet.env on node n and writes the
// node's CNI configuration from it (containerd picks it up; then kubelet
// reports the node Ready).
func (b *builder) writeFlannelCNI(ctx context.Context, n node) error {
	path := filepath.Join(b.dir, flannelRunDir, n.name, subnetEnv)
	var text []byte
	if err := waitFor(ctx, flannelWait, "flanneld on "+n.name+" to write "+path+" (kubectl -n "+flannelNamespace+" logs)", func() bool {
		var err error
		text, err = os.ReadFile(path)
		return err == nil && len(text) > 0
	}); err != nil {
		return err
	}
	s, err := parseSubnetEnv(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !s.Network.Contains(s.Subnet.IP) {
		return fmt.Errorf("%s: FLANNEL_SUBNET %s is outside FLANNEL_NETWORK %s", path, s.Subnet, s.Network)
	}
	data, err := flannelConflist(s, filepath.Join(n.dir, "cni-ipam"))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.dir, "cni", "10-flannel.conflist"), data, 0o644)
}

// startFlannel gives every node its podCIDR, then creates flannel's
// DaemonSet (so that no flanneld starts before its node has a podCIDR: it
// would exit and wait out a crash-loop back-off), and writes each node's CNI
// configuration once its flanneld has taken its lease.
func (b *builder) startFlannel(ctx context.Context, cs kubernetes.Interface) error {
	for _, n := range b.nodes {
		if err := setPodCIDR(ctx, cs, n); err != nil {
			return err
		}
	}
	if err := createFlannel(ctx, cs, b.flannelRef, b.spec.flannelBackend(), filepath.Join(b.dir, flannelRunDir)); err != nil {
		return err
	}
	b.say("waiting for flanneld (%s) on %d nodes", b.spec.flannelBackend(), len(b.nodes))
	for _, n := range b.nodes {
		if err := b.writeFlannelCNI(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

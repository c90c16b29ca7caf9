package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/kube/image"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Cluster DNS as every real cluster has it: CoreDNS (built from the Go module
// proxy, see internal/kube/binaries) as the kube-dns Service in kube-system,
// and kubelets that point pods at it.

const (
	// ClusterDomain is the cluster's DNS domain (kubelet's clusterDomain).
	ClusterDomain = "cluster.local"
	dnsName       = "coredns"
	dnsService    = "kube-dns"
	dnsNamespace  = "kube-system"
	dnsWait       = 2 * time.Minute
	// FactDNS is the Facts key of the kube-dns Service's ClusterIP.
	FactDNS = "dns"
)

// corefile serves the cluster domain and reverse lookups from the API. No
// forward plugin: the cluster's namespaces have no upstream nameserver, so
// names outside the cluster get SERVFAIL rather than leaving the cluster.
const corefile = `.:53 {
    errors
    health {
        lameduck 2s
    }
    ready
    kubernetes ` + ClusterDomain + ` in-addr.arpa ip6.arpa {
        pods insecure
        ttl 30
    }
    prometheus :9153
    cache 30
    loadbalance
    reload
}
`

// coreDNSImage builds CoreDNS (first time only) and its image archive, kept
// beside the binary, and returns the image's reference and archive.
func coreDNSImage(ctx context.Context, say func(string, ...any)) (ref, tarPath string, err error) {
	bin, err := binaries.EnsureCoreDNS(ctx, say)
	if err != nil {
		return "", "", err
	}
	ref = "vnetlab.local/coredns:" + binaries.CoreDNSBuild()
	tarPath, err = cachedImage(bin, func() (*image.Image, error) { return image.Program(ref, bin, "/coredns") })
	return ref, tarPath, err
}

// cachedImage is the image archive kept beside bin, a program of a pinned
// build in its cache directory: written by build the first time only (the
// build's directory name changes with the build).
func cachedImage(bin string, build func() (*image.Image, error)) (string, error) {
	tarPath := filepath.Join(filepath.Dir(filepath.Dir(bin)), "image.tar")
	if _, err := os.Stat(tarPath); err == nil {
		return tarPath, nil
	}
	img, err := build()
	if err != nil {
		return "", err
	}
	return tarPath, img.Write(tarPath)
}

// createDNS creates CoreDNS's objects: its ServiceAccount with the rights the
// kubernetes plugin needs, the Corefile, the Deployment and the kube-dns
// Service.
func createDNS(ctx context.Context, cs kubernetes.Interface, ref string, dnsIP net.IP) error {
	labels := map[string]string{"k8s-app": dnsService}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: dnsName, Namespace: dnsNamespace}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:" + dnsName}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "system:" + dnsName},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: dnsName, Namespace: dnsNamespace}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: dnsName, Namespace: dnsNamespace}, Data: map[string]string{"Corefile": corefile}}
	replicas := int32(2)
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: dnsName, Namespace: dnsNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: coreDNSPod(ref, labels)}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: dnsService, Namespace: dnsNamespace, Labels: labels},
		Spec: corev1.ServiceSpec{Selector: labels, ClusterIP: dnsIP.String(), Ports: []corev1.ServicePort{
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
			{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9153, TargetPort: intstr.FromInt32(9153)},
		}}}
	return createAll("cluster DNS",
		create(ctx, dnsName+" ServiceAccount", cs.CoreV1().ServiceAccounts(dnsNamespace), sa),
		create(ctx, dnsName+" ClusterRole", cs.RbacV1().ClusterRoles(), role),
		create(ctx, dnsName+" ClusterRoleBinding", cs.RbacV1().ClusterRoleBindings(), binding),
		create(ctx, dnsName+" ConfigMap", cs.CoreV1().ConfigMaps(dnsNamespace), cm),
		create(ctx, dnsName+" Service", cs.CoreV1().Services(dnsNamespace), svc),
		create(ctx, dnsName+" Deployment", cs.AppsV1().Deployments(dnsNamespace), deploy))
}

// coreDNSPod is CoreDNS's pod: the node's image (never pulled), the Corefile
// from the ConfigMap, no DNS of its own (dnsPolicy Default: kubelet's
// resolvConf is empty), only the capability to bind port 53.
func coreDNSPod(ref string, labels map[string]string) corev1.PodSpec {
	no, yes := false, true
	probe := func(path string, port int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(port)}},
			TimeoutSeconds: 5, PeriodSeconds: 2, FailureThreshold: 5}
	}
	live := probe("/health", 8080)
	live.InitialDelaySeconds, live.PeriodSeconds = 30, 10
	return corev1.PodSpec{
		ServiceAccountName: dnsName,
		PriorityClassName:  "system-cluster-critical",
		DNSPolicy:          corev1.DNSDefault,
		// Spread the replicas over the nodes when there are several.
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname"}}}}},
		TerminationGracePeriodSeconds: new(int64(5)),
		Containers: []corev1.Container{{
			Name: dnsName, Image: ref, ImagePullPolicy: corev1.PullNever,
			Args: []string{"-conf", "/etc/coredns/Corefile"},
			Ports: []corev1.ContainerPort{
				{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
				{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
			},
			Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("70Mi")}},
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/coredns", ReadOnly: true}},
			ReadinessProbe: probe("/ready", 8181),
			LivenessProbe:  live,
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_BIND_SERVICE"}}},
		}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: dnsName}, Items: []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}}}}}},
	}
}

// waitDNS waits until cluster DNS answers, over UDP to its ClusterIP, the
// kubernetes Service's name with its ClusterIP (an A or AAAA record, of the
// primary family); query asks server (host:port) for a name's records of a
// type from one of the nodes (Query in its namespace, or a process of the
// node: nodeQuery).
func waitDNS(ctx context.Context, a addrPlan, query func(server, name string, t dnsmessage.Type) ([]net.IP, error)) error {
	name := "kubernetes.default.svc." + ClusterDomain + "."
	dnsIP, want := a.dnsIP(), a.kubernetesIP()
	server := net.JoinHostPort(dnsIP.String(), "53")
	last := errors.New("no answer yet")
	err := waitFor(ctx, dnsWait, "cluster DNS", func() bool {
		ips, err := query(server, name, RecordType(want))
		if err == nil && !slices.ContainsFunc(ips, want.Equal) {
			err = fmt.Errorf("%s answered %v, want %s", server, ips, want)
		}
		last = err
		return err == nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("cluster DNS did not answer %s at %s within %s (last: %v): see `kubectl -n %s describe pods -l k8s-app=%s` and their logs",
			name, dnsIP, dnsWait, last, dnsNamespace, dnsService)
	}
	return err
}

// RecordType is the DNS record type of ip's family: A or AAAA.
func RecordType(ip net.IP) dnsmessage.Type {
	if ip.To4() == nil {
		return dnsmessage.TypeAAAA
	}
	return dnsmessage.TypeA
}

// QueryA asks server (host:port) over UDP, from network namespace ns (""
// for the caller's own), for the A records of the absolute name.
func QueryA(ctx context.Context, ns, server, name string) ([]net.IP, error) {
	return Query(ctx, ns, server, name, dnsmessage.TypeA)
}

// Query is QueryA for records of type t (A or AAAA).
func Query(ctx context.Context, ns, server, name string, t dnsmessage.Type) ([]net.IP, error) {
	var conn net.Conn
	dial := func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "udp", server)
		return err
	}
	// The socket belongs to the namespace it was made in, whichever thread uses it.
	if ns != "" {
		if err := nsutil.Do(ns, dial); err != nil {
			return nil, err
		}
	} else if err := dial(); err != nil {
		return nil, err
	}
	defer conn.Close()
	var idb [2]byte
	_, _ = rand.Read(idb[:])
	id := binary.BigEndian.Uint16(idb[:])
	q := dnsmessage.Message{Header: dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(name), Type: t, Class: dnsmessage.ClassINET}}}
	packed, err := q.Pack()
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write(packed); err != nil {
		return nil, err
	}
	buf := make([]byte, 1500)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		var m dnsmessage.Message
		if err := m.Unpack(buf[:n]); err != nil || m.ID != id {
			continue // not our answer
		}
		if m.RCode != dnsmessage.RCodeSuccess {
			return nil, fmt.Errorf("%s: %s", name, m.RCode)
		}
		var ips []net.IP
		for _, a := range m.Answers {
			switch r := a.Body.(type) {
			case *dnsmessage.AResource:
				ips = append(ips, net.IP(r.A[:]))
			case *dnsmessage.AAAAResource:
				ips = append(ips, net.IP(r.AAAA[:]))
			}
		}
		return ips, nil
	}
}

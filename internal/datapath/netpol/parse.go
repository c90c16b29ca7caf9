package netpol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Doc is what a YAML file gives the model, in Kubernetes' own objects:
// NetworkPolicies, Namespaces (their labels) and Pods (a lab pod's
// namespace, labels and named container ports; its addresses are the lab's).
type Doc struct {
	Policies   []networkingv1.NetworkPolicy
	Namespaces []Namespace
	Pods       []Pod
}

// The kinds a file may hold.
const (
	KindNetworkPolicy = "NetworkPolicy"
	KindNamespace     = "Namespace"
	KindPod           = "Pod"
)

// Parse reads a YAML (or JSON) stream of NetworkPolicy, Namespace and Pod
// documents ("---" between them). Unknown fields are refused, so a typo
// is an error rather than a rule silently missing.
func Parse(data []byte) (Doc, error) {
	var doc Doc
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for n := 1; ; n++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return doc, nil
		}
		if err != nil {
			return Doc{}, fmt.Errorf("document %d: %s", n, field.OneLine(err.Error()))
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		var head struct{ APIVersion, Kind string }
		if err := json.Unmarshal(raw, &head); err != nil {
			return Doc{}, fmt.Errorf("document %d: %v", n, err)
		}
		var want string
		switch head.Kind {
		case KindNetworkPolicy:
			want = networkingv1.SchemeGroupVersion.String()
			var p networkingv1.NetworkPolicy
			err = strict(raw, &p)
			if p.Namespace == "" {
				p.Namespace = DefaultNamespace
			}
			doc.Policies = append(doc.Policies, p)
		case KindNamespace:
			want = corev1.SchemeGroupVersion.String()
			var ns corev1.Namespace
			err = strict(raw, &ns)
			doc.Namespaces = append(doc.Namespaces, Namespace{Name: ns.Name, Labels: ns.Labels})
		case KindPod:
			want = corev1.SchemeGroupVersion.String()
			var p corev1.Pod
			if err = strict(raw, &p); err == nil {
				doc.Pods = append(doc.Pods, PodFrom(&p))
			}
		default:
			return Doc{}, fmt.Errorf("document %d: kind %q: a policy file holds NetworkPolicy, Namespace and Pod documents", n, head.Kind)
		}
		if err != nil {
			return Doc{}, fmt.Errorf("document %d (%s): %v", n, head.Kind, err)
		}
		if head.APIVersion != want {
			return Doc{}, fmt.Errorf("document %d (%s): apiVersion %q: use %s", n, head.Kind, head.APIVersion, want)
		}
	}
}

// strict decodes JSON refusing fields the type does not have.
func strict(raw []byte, into any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(into)
}

// PodFrom is a Pod of the model from a Kubernetes Pod: its name, namespace
// (DefaultNamespace when unset), labels and named container ports (TCP
// when a port gives no protocol); no addresses yet.
func PodFrom(p *corev1.Pod) Pod {
	out := Pod{Name: p.Name, Namespace: p.Namespace, Labels: Labels(p.Labels)}
	if out.Namespace == "" {
		out.Namespace = DefaultNamespace
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "" {
				continue
			}
			proto := Proto(cp.Protocol)
			if proto == "" {
				proto = TCP
			}
			port := uint16(0) // out of range: Check refuses it
			if cp.ContainerPort >= 1 && cp.ContainerPort <= 65535 {
				port = uint16(cp.ContainerPort)
			}
			out.Ports = append(out.Ports, NamedPort{Name: cp.Name, Proto: proto, Port: port})
		}
	}
	return out
}

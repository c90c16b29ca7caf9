package measure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vnetlab/vnetlab/internal/kube/image"
)

// What a dial became (Dial): `kube run`'s policies proof wants Dropped for
// a port the policies deny.
const (
	Connected = "connected"
	Refused   = "refused"
	Dropped   = "dropped"
)

// Dial connects to addr over TCP and says what became of it: Connected,
// Refused (a reset: nothing listens, or a reject), Dropped (no answer
// within timeout), or the error.
func Dial(addr string, timeout time.Duration) string {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err == nil {
		conn.Close()
		return Connected
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return Dropped
	case strings.Contains(err.Error(), "connection refused"):
		return Refused
	}
	return "error: " + err.Error()
}

// DialFrom runs Dial in pod (`vnetlab kube dial` in the image) and returns
// what it printed.
func (s *Session) DialFrom(ctx context.Context, pod, addr string, timeout time.Duration) (string, error) {
	p := s.Exec.process(ctx, pod, "vnetlab kube dial", append(append([]string{}, GuardArgs...), image.VnetlabPath, "kube", "dial", "--timeout", timeout.String(), addr))
	out, err := p.Output()
	return strings.TrimSpace(string(out)), err
}

// CreatePolicies creates the NetworkPolicies in the session's namespace
// (ExtraWorkers at a time, without the client-side rate limit, as
// extra Services are) and returns how long it took.
func (s *Session) CreatePolicies(ctx context.Context, pols []networkingv1.NetworkPolicy) (time.Duration, error) {
	cs, err := extraClient(s.Config)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	err = parallel(ctx, len(pols), func(i int) error {
		p := pols[i]
		p.Namespace = s.Namespace
		_, err := retryAPI(ctx, func(c context.Context) error {
			_, err := cs.NetworkingV1().NetworkPolicies(s.Namespace).Create(c, &p, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("create NetworkPolicy %s in %s: %v", p.Name, s.Namespace, err)
		}
		return nil
	})
	return time.Since(start), err
}

// PolicyNames lists the NetworkPolicies of the session's namespace, read
// back through the API.
func (s *Session) PolicyNames(ctx context.Context) ([]string, error) {
	c, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := s.Client.NetworkingV1().NetworkPolicies(s.Namespace).List(c, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names, nil
}

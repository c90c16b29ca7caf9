package measure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/vnetlab/vnetlab/internal/kube/image"
)

// What a dial became (Dial): `kube run`'s policies proof wants a port the
// policies deny Denied.
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

// Denied says whether a dial's outcome (Dial) is a connection refused by
// policy, to a port where something listens (Session.Listen): dropped
// (vnetlab's enforcers, and most others, drop a denied SYN) or refused
// (kube-router rejects it with an ICMP port unreachable, which connect
// reports as a reset's ECONNREFUSED).
func Denied(got string) bool { return got == Dropped || got == Refused }

// Listen starts, in pod, a TCP listener on port for the rest of the
// session (`vnetlab whoami`, under the guard; Close ends it) and
// waits, up to 10 s, until a connection from the pod to its own address
// addr (which no NetworkPolicy governs: it never leaves the pod) is
// accepted: a policy proof's denied port, on which a refusal is the
// policy's and not an empty port's.
func (s *Session) Listen(ctx context.Context, pod, addr string, port int) error {
	p := s.Exec.process(ctx, pod, "vnetlab whoami", append(append([]string{}, GuardArgs...), image.VnetlabPath, "whoami", "--tcp", strconv.Itoa(port)))
	if err := p.Start(); err != nil {
		return fmt.Errorf("pod %s: a listener on port %d: %v", pod, port, err)
	}
	s.background = append(s.background, p)
	target := net.JoinHostPort(addr, strconv.Itoa(port))
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		if got, _ = s.DialFrom(ctx, pod, target, time.Second); got == Connected {
			return nil
		}
	}
	return fmt.Errorf("pod %s: its listener on port %d does not accept a connection from the pod itself (tcp %s: %s)", pod, port, target, got)
}

// DialFrom runs Dial in pod (`vnetlab kube dial` in the image) and returns
// what it printed.
func (s *Session) DialFrom(ctx context.Context, pod, addr string, timeout time.Duration) (string, error) {
	p := s.Exec.process(ctx, pod, "vnetlab kube dial", append(append([]string{}, GuardArgs...), image.VnetlabPath, "kube", "dial", "--timeout", timeout.String(), addr))
	out, err := p.Output()
	return strings.TrimSpace(string(out)), err
}

// CreatePolicies creates the NetworkPolicies in the session's namespace
// (CreatePolicies) and returns how long it took.
func (s *Session) CreatePolicies(ctx context.Context, pols []networkingv1.NetworkPolicy, say func(string, ...any)) (time.Duration, error) {
	return CreatePolicies(ctx, s.Config, s.Namespace, pols, say)
}

// CreatePolicies creates pols in namespace ns, ExtraWorkers calls at once
// without client-go's client-side rate limit (as extra Services are: at
// its 5/s, 1001 policies took 198 s), say reporting progress every few
// seconds, and returns how long it took. Both of a cluster's generated
// sets are made here: `kube run`'s policies knob (bench/policies.go) and
// `kube converge --policy`'s extra policies (bench/convpolicy.go). On
// failure those made are left to the namespace's deletion.
func CreatePolicies(ctx context.Context, cfg *rest.Config, ns string, pols []networkingv1.NetworkPolicy, say func(string, ...any)) (time.Duration, error) {
	cs, err := extraClient(cfg)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	var done atomic.Int64
	stop := progressEvery(5*time.Second, func() {
		say("NetworkPolicies in %s: %d/%d created (%.0f/s)", ns, done.Load(), len(pols), float64(done.Load())/time.Since(start).Seconds())
	})
	err = parallel(ctx, len(pols), func(i int) error {
		p := pols[i]
		p.Namespace = ns
		if _, err := retryAPI(ctx, func(c context.Context) error {
			_, err := cs.NetworkingV1().NetworkPolicies(ns).Create(c, &p, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("create NetworkPolicy %s in %s: %v", p.Name, ns, err)
		}
		done.Add(1)
		return nil
	})
	stop()
	return time.Since(start), err
}

// deletePoliciesTimeout bounds DeletePolicies' one call.
const deletePoliciesTimeout = 5 * time.Minute

// DeletePolicies deletes namespace ns's NetworkPolicies in one call (the
// enforcers drop them before the namespace goes); it works after the
// run's ctx was cancelled.
func DeletePolicies(cfg *rest.Config, ns string) error {
	// One request, which the API server answers once every policy is
	// gone: 10,000 outlast extraClient's timeout on a 2-vCPU machine.
	cs, err := bulkClient(cfg, deletePoliciesTimeout)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), deletePoliciesTimeout)
	defer cancel()
	return cs.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
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

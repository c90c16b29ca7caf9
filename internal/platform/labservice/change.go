package labservice

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// A change to a running lab's Services (`svc add/del`, `ep add/del`) is one
// transaction: made under the lab's lock, applied with the provider (an
// update in place: live flows keep their backends) and saved; on any error
// the lab and its services.json stay as they were.

// Result says what a change did, for the CLI to print.
type Result struct {
	Lab, Provider string
	// Message says what changed ("service 10.96.0.9:80/tcp -> ... added").
	Message string
	// Count is how many Services the lab has now ("6 services + 1000 generated").
	Count       string
	LoadSeconds float64
	// NeedsEndpoints: the provider's programs sit on pods and none is
	// attached yet (`ep add`); ClientPod is a pod to name in the hint.
	NeedsEndpoints bool
	ClientPod      string
}

func (r Result) String() string {
	return fmt.Sprintf("%s: lab %s, provider %s, %s, loaded in %.2fs", r.Message, r.Lab, r.Provider, r.Count, r.LoadSeconds)
}

// Edit runs change on lab name's services under the lab's lock, applies the
// result with the provider and saves it (the transaction every change goes
// through). change returns the message of its Result.
func Edit(name string, change func(st *lab.State, c *Config) (string, error)) (Result, error) {
	st, c, msg, err := lab.EditFile(name, Load, change, Commit)
	if err != nil {
		return Result{}, err
	}
	return Result{Lab: st.Name, Provider: c.Provider, Message: msg, Count: c.CountText(), LoadSeconds: c.LoadSeconds}, nil
}

// UseProvider sets the provider of a lab that has no Services yet (want ""
// keeps the lab's, or gives it its mode's default); a lab with Services
// keeps its provider.
func (c *Config) UseProvider(st *lab.State, want string) error {
	if want == "" || want == c.Provider {
		if c.Provider == "" {
			m, err := st.ModeOf()
			if err != nil {
				return fmt.Errorf("lab %s: %w", st.Name, err)
			}
			c.Provider = DefaultProviderFor(m)
		}
		return CheckLab(c.Provider, st)
	}
	if c.Provider != "" && c.Count() > 0 {
		return fmt.Errorf("lab %s's %d services are realised by %s: leave out the provider, or delete them first to switch to %s", st.Name, c.Count(), c.Provider, want)
	}
	if err := CheckLab(want, st); err != nil {
		return err
	}
	if c.Installed {
		old, _ := Get(c.Provider)
		if err := old.Remove(st, c); err != nil {
			return fmt.Errorf("removing provider %s: %w", c.Provider, err)
		}
		c.Installed = false
	}
	c.Provider = want
	return nil
}

// AddRequest is `svc add`: a Service and its backends, with the provider
// for a lab that has no Services yet ("": the lab's, or its mode's default).
type AddRequest struct {
	Key      Key
	Backends []BackendSpec
	Provider string
}

// Add adds a Service to lab name, or backends to a Service it has: the
// provider updates it in place, so its live flows keep their backends.
func Add(name string, r AddRequest) (Result, error) {
	if r.Provider != "" {
		if _, err := Get(r.Provider); err != nil {
			return Result{}, err
		}
	}
	var needs bool
	var client string
	res, err := Edit(name, func(st *lab.State, c *Config) (string, error) {
		if err := c.UseProvider(st, r.Provider); err != nil {
			return "", err
		}
		if err := CheckVIP(st, r.Key.VIP); err != nil {
			return "", err
		}
		info, _ := Describe(c.Provider)
		if len(r.Backends) == 0 && !info.KeepsEmptyServices {
			return "", fmt.Errorf("no --backend given: a service of provider %s needs at least one (example: --backend 192.168.10.10:5201 or --backend pod-a; %s keep a Service without backends, refusing its clients)",
				c.Provider, strings.Join(NamesWhere(func(i Info) bool { return i.KeepsEmptyServices }), " and "))
		}
		var be []Backend
		if len(r.Backends) > 0 {
			var err error
			if be, err = Resolve(st, r.Backends, r.Key); err != nil {
				return "", err
			}
		}
		needs, client = info.Endpoints && len(c.Endpoints) == 0 && !ownsPrograms(st), clientPod(st)
		if c.Find(r.Key) >= 0 {
			added, err := c.AddBackends(r.Key, be)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("service %s: backends %s added", r.Key, BackendList(added)), nil
		}
		s := Service{VIP: r.Key.VIP, Port: r.Key.Port, Proto: r.Key.Proto, Backends: be}
		if err := c.Add(s); err != nil {
			return "", err
		}
		if len(s.Backends) == 0 {
			return fmt.Sprintf("service %s added without backends: its clients are refused until one is added", s), nil
		}
		return fmt.Sprintf("service %s -> %s added", s, BackendList(s.Backends)), nil
	})
	res.NeedsEndpoints, res.ClientPod = needs, client
	return res, err
}

// Del deletes a Service from lab name (TCP connections already open keep
// their backend: their conntrack entry holds it, with every provider).
func Del(name string, k Key) (Result, error) {
	return Edit(name, func(_ *lab.State, c *Config) (string, error) {
		if err := c.Del(k); err != nil {
			return "", err
		}
		return fmt.Sprintf("service %s deleted", k), nil
	})
}

// PodRef names a pod of a lab for `ep add/del`: by name, or by its
// namespace and interface; Placement "" is the mode's (PlacementFor).
type PodRef struct {
	Pod, Ifname, NetNS, Placement string
}

// Check validates a reference before any lab is touched.
func (r PodRef) Check() error {
	if r.Pod == "" && r.NetNS == "" {
		return fmt.Errorf("say which pod: --pod pod-a, or --ifname eth0 --netns /var/run/netns/NAME")
	}
	if r.Pod != "" && r.NetNS != "" {
		return fmt.Errorf("--pod and --netns both name a pod: give one of them")
	}
	if r.Pod != "" {
		if err := lab.ValidName("pod", r.Pod); err != nil {
			return fmt.Errorf("--pod: %v", err)
		}
	}
	if r.NetNS != "" && r.Ifname == "" {
		return fmt.Errorf("--netns needs --ifname (the pod's interface, e.g. eth0)")
	}
	if r.Placement != "" && !slices.Contains([]string{PlacementPod, PlacementNode, PlacementRouted}, r.Placement) {
		return fmt.Errorf("--placement %q: want pod or node, or routed (veth-ebpf host routing)", r.Placement)
	}
	return nil
}

// endpoint finds the pod r names; only the lab's own pods qualify.
func (r PodRef) endpoint(st *lab.State) (Endpoint, error) {
	var pod *lab.PodState
	for i := range st.Pods {
		p := &st.Pods[i]
		if r.Pod != "" && p.Name == r.Pod {
			pod = p
		}
		if r.NetNS != "" && (filepath.Base(r.NetNS) == p.NS || r.NetNS == p.NS) {
			pod = p
		}
	}
	if pod == nil {
		what := "pod " + r.Pod
		if r.NetNS != "" {
			what = fmt.Sprintf("namespace %q", r.NetNS)
		}
		var have []string
		for _, p := range st.Pods {
			have = append(have, fmt.Sprintf("%s (%s)", p.Name, filepath.Join("/var/run/netns", p.NS)))
		}
		return Endpoint{}, fmt.Errorf("%s is not a pod of lab %s (pods: %s)", what, st.Name, strings.Join(have, ", "))
	}
	if r.Ifname != "" && r.Ifname != pod.Ifname {
		return Endpoint{}, fmt.Errorf("pod %s has no interface %q (its interface is %s)", pod.Name, r.Ifname, pod.Ifname)
	}
	pl := r.Placement
	if pl == "" {
		pl = labPlacement(st)
	}
	return Endpoint{Pod: pod.Name, NS: pod.NS, Ifname: pod.Ifname, Placement: pl}, nil
}

// Attach attaches the programs of the provider with endpoints for the pod
// r names (`ep add`).
func Attach(name string, r PodRef) (Result, error) {
	if err := r.Check(); err != nil {
		return Result{}, err
	}
	withEndpoints := NamesWhere(func(i Info) bool { return i.Endpoints })
	return Edit(name, func(st *lab.State, c *Config) (string, error) {
		if c.Provider != "" && !slices.Contains(withEndpoints, c.Provider) {
			return "", fmt.Errorf("lab %s's services use %s, which needs no endpoints (its rules in the node see every pod's traffic); endpoints are for provider %s", st.Name, c.Provider, strings.Join(withEndpoints, ", "))
		}
		if err := c.UseProvider(st, withEndpoints[0]); err != nil {
			return "", err
		}
		ep, err := r.endpoint(st)
		if err != nil {
			return "", err
		}
		for _, e := range c.Endpoints {
			if e.NS == ep.NS && e.Ifname == ep.Ifname {
				return "", fmt.Errorf("endpoint %s/%s (pod %s) is already attached", ep.NS, ep.Ifname, ep.Pod)
			}
		}
		c.Endpoints = append(c.Endpoints, ep)
		return fmt.Sprintf("endpoint %s (%s in %s, placement %s) attached", ep.Pod, ep.Ifname, ep.NS, ep.Placement), nil
	})
}

// Detach detaches the programs from the pod r names (`ep del`).
func Detach(name string, r PodRef) (Result, error) {
	if err := r.Check(); err != nil {
		return Result{}, err
	}
	return Edit(name, func(st *lab.State, c *Config) (string, error) {
		ep, err := r.endpoint(st)
		if err != nil {
			return "", err
		}
		for i, e := range c.Endpoints {
			if e.NS == ep.NS && e.Ifname == ep.Ifname {
				c.Endpoints = append(c.Endpoints[:i], c.Endpoints[i+1:]...)
				return fmt.Sprintf("endpoint %s detached", ep.Pod), nil
			}
		}
		return "", fmt.Errorf("pod %s has no endpoint (see `vnetlab ep ls %s`)", ep.Pod, st.Name)
	})
}

// BackendList names backends for people: "192.168.10.10:5201 (pod-a), ...".
func BackendList(bs []Backend) string {
	var out []string
	for _, b := range bs {
		s := b.String()
		if b.Pod != "" {
			s += " (" + b.Pod + ")"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// clientPod is the pod a hint names: the service path's client.
func clientPod(st *lab.State) string {
	if len(st.Pods) > 1 {
		return st.Pods[1].Name
	}
	if len(st.Pods) == 1 {
		return st.Pods[0].Name
	}
	return "POD"
}

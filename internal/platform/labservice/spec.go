package labservice

import (
	"context"
	"fmt"

	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// Spec is a service as written in a scenario file:
//
//	services:
//	  - {service: 10.96.0.100:80/tcp, backends: [pod-a:5201, 192.168.10.12:5201]}
type Spec struct {
	Service  string   `yaml:"service" json:"service"`
	Backends []string `yaml:"backends" json:"backends"`
}

// Check validates the syntax (no lab needed).
func (s Spec) Check() error {
	if _, err := ParseKey(s.Service); err != nil {
		return err
	}
	if len(s.Backends) == 0 {
		return fmt.Errorf("service %s has no backends (backends: [pod-a:5201])", s.Service)
	}
	for _, b := range s.Backends {
		if _, err := ParseBackend(b); err != nil {
			return err
		}
	}
	return nil
}

// Build resolves a spec against a lab.
func (s Spec) Build(st *lab.State) (Service, error) {
	k, err := ParseKey(s.Service)
	if err != nil {
		return Service{}, err
	}
	if err := CheckVIP(st, k.VIP); err != nil {
		return Service{}, fmt.Errorf("service %s: %v", k, err)
	}
	var specs []BackendSpec
	for _, b := range s.Backends {
		bs, err := ParseBackend(b)
		if err != nil {
			return Service{}, err
		}
		specs = append(specs, bs)
	}
	be, err := Resolve(st, specs, k)
	if err != nil {
		return Service{}, fmt.Errorf("service %s: %v", k, err)
	}
	return Service{VIP: k.VIP, Port: k.Port, Proto: k.Proto, Backends: be}, nil
}

// UpLab brings lab ls up (`vnetlab up`) and, with a provider, loads its
// Services: specs (else the service path's) and extra generated ones. On
// any failure nothing stays up. say reports the steps (nil: quiet).
func UpLab(ctx context.Context, ls lab.Spec, provider string, extra int, specs []Spec, say lab.Progress) (*lab.Lab, *Config, error) {
	if provider != "" {
		if err := CheckFamily(provider, ls.Family); err != nil {
			return nil, nil, err
		}
	}
	l, err := lab.Up(ctx, ls, say)
	if err != nil || provider == "" {
		return l, nil, err
	}
	c, err := NewConfig(l.State, provider, extra, specs)
	if err == nil {
		if say != nil {
			say("loading %d services with %s", c.Count(), provider)
		}
		err = Commit(l.State, nil, c)
	}
	if err != nil {
		name := l.State.Name
		l.Release()
		_ = lab.Down(name, nil) // nothing half-built
		return nil, nil, err
	}
	return l, c, nil
}

// Setup loads a new lab's services (`up --provider`, `run`'s service path):
// NewConfig, then Commit.
func Setup(st *lab.State, provider string, extra int, specs []Spec) (*Config, error) {
	c, err := NewConfig(st, provider, extra, specs)
	if err != nil {
		return nil, err
	}
	return c, Commit(st, nil, c)
}

// NewConfig builds the services of a lab brought up with a provider (`up
// --provider`, `run`): the scenario's services, or else the service path's
// (DefaultVIP on the engine ports, to the first pod); extra generated
// services; for ebpf, an endpoint on every pod.
func NewConfig(st *lab.State, provider string, extra int, specs []Spec) (*Config, error) {
	c := &Config{Provider: provider, Extra: extra, Family: st.Spec.Family}
	if len(specs) == 0 {
		server, _, err := Path(st)
		if err != nil {
			return nil, err
		}
		c.Services = EngineServices(server, st.Spec.Family)
	}
	for _, sp := range specs {
		s, err := sp.Build(st)
		if err != nil {
			return nil, err
		}
		if err := c.Add(s); err != nil {
			return nil, err
		}
	}
	if i, err := Describe(provider); err == nil && i.Endpoints {
		c.Endpoints = DefaultEndpoints(st)
	}
	return c, c.Validate(st)
}

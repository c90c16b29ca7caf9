package labservice

import (
	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/sock"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/cgroup"
)

// ebpf-sock: Services translated at the socket (internal/datapath/sock,
// bpf/sock.c; docs/ebpf.md), Cilium's socket-level load balancer: cgroup
// connect/sendmsg/recvmsg/getpeername programs (IPv4 and IPv6) on the lab's
// own cgroup rewrite a clusterIP when a socket connects or sends, so no
// packet ever carries it: no DNAT, no conntrack, and any mode works, macvlan included.
// Only processes started in the lab's cgroup are translated: ClientCgroup
// says where (the runner's engines and `vnetlab exec` start clients there).
type sockProvider struct{}

func init() { Register(sockProvider{}) }

func (sockProvider) Info() Info {
	return Info{Name: EBPFSock, KeepsEmptyServices: true, IPv6: true,
		Summary: "socket-level eBPF (Cilium's socket LB): cgroup connect/sendmsg/recvmsg/getpeername (4 and 6) on the lab's cgroup; no per-packet NAT; clients run in that cgroup"}
}

// Supports: any mode with pods (no packet carries the clusterIP).
func (sockProvider) Supports(m modes.Mode) string { return podMode(m) }

// ClientCgroup is the cgroup a client must start in to use the Services.
func (sockProvider) ClientCgroup(st *lab.State) (string, error) { return cgroup.LabPath(st.Name) }

func (p sockProvider) Install(st *lab.State, c *Config) error { return p.sync(st, c) }

func (p sockProvider) Update(st *lab.State, _, c *Config) error { return p.sync(st, c) }

func (sockProvider) sync(st *lab.State, c *Config) error {
	pl, _, err := sock.Setup(st.Name, st.Spec.Family, lab.Recorder(st.Name))
	if err != nil {
		return err
	}
	defer pl.Close()
	return syncServices(pl.Plane, c)
}

func (sockProvider) Remove(st *lab.State, _ *Config) error {
	pl, err := sock.Open(st.Name)
	if err != nil {
		return err
	}
	defer pl.Close()
	if err := pl.Detach(); err != nil {
		return err
	}
	return syncServices(pl.Plane, &Config{})
}

// ClientPlacer is implemented by providers whose Services act only for
// clients started in a given cgroup (socket-level ones).
type ClientPlacer interface {
	ClientCgroup(st *lab.State) (string, error)
}

// ClientCgroup returns the cgroup the service path's client must start in
// with this provider ("" when anywhere will do).
func ClientCgroup(st *lab.State, provider string) (string, error) {
	p, err := Get(provider)
	if err != nil {
		return "", err
	}
	if cp, ok := p.(ClientPlacer); ok {
		return cp.ClientCgroup(st)
	}
	return "", nil
}

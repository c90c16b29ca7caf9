package service

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/lab"
)

// ebpf: vnetlab's own eBPF Service data plane (package internal/service/ebpf:
// tc clsact programs doing DNAT with a BPF conntrack and reverse NAT, maps
// pinned per lab under /sys/fs/bpf/vnetlab/LAB). This file only adapts it to
// the Provider interface: services go into its maps, endpoints say where its
// programs are attached. Placement follows seed 002: on the node end of each
// pod's veth (veth+eBPF), inside the pods for macvlan/ipvlan (ipvlan+eBPF).
type ebpfProvider struct{}

func init() { Register(ebpfProvider{}) }

// EBPFDataPlane is what this provider needs from the eBPF package.
type EBPFDataPlane interface {
	// AddService adds a service or replaces its backends.
	AddService(s Service) error
	DelService(k Key) error
	ListServices() ([]Key, error)
	// AttachEndpoint attaches the programs for the pod whose interface is
	// ifname in namespace ns: on that interface (PlacementPod) or on the node
	// end of its veth (PlacementHost). Attaching twice is not an error.
	AttachEndpoint(ns, ifname, placement string) error
	DetachEndpoint(ns, ifname string) error
	ListEndpoints() ([]Endpoint, error)
	Close() error
}

// OpenEBPF opens (creating and pinning on first use) a lab's eBPF data plane.
//
// TODO(bpf): set by internal/service/ebpf once branch bpf is merged, e.g. in
// ebpf_open.go: `func init() { OpenEBPF = func(l string) (EBPFDataPlane, error) { return ebpf.Open(l) } }`
// with a small adapter if its method signatures differ. Until then the
// provider reports itself unavailable instead of pretending.
var OpenEBPF func(labName string) (EBPFDataPlane, error)

func (ebpfProvider) Name() string { return "ebpf" }
func (ebpfProvider) Summary() string {
	return "vnetlab's eBPF data plane: tc programs, hash service map, BPF conntrack + reverse NAT (seed 002's mustang, open)"
}

// ebpfPlacement is where programs go for each mode (seed 002).
var ebpfPlacement = map[string]string{
	"veth-routed": PlacementHost, "bridge": PlacementHost, "docker-nat": PlacementHost,
	"macvlan": PlacementPod, "ipvlan": PlacementPod,
}

func (ebpfProvider) Supports(mode string) string {
	if OpenEBPF == nil {
		return "vnetlab's eBPF data plane (internal/service/ebpf) is not part of this build yet"
	}
	if mode == "host" {
		return "mode host has no pods to put behind a clusterIP"
	}
	if _, ok := ebpfPlacement[mode]; !ok {
		return "not wired for this mode yet (works with: veth-routed, bridge, docker-nat, macvlan, ipvlan)"
	}
	return ""
}

// DefaultEndpoints attaches programs for every pod of the lab, as a CNI does
// when pods are created (`up --provider ebpf`, `run`).
func DefaultEndpoints(st *lab.State) []Endpoint {
	var out []Endpoint
	for _, p := range st.Pods {
		out = append(out, Endpoint{Pod: p.Name, NS: p.NS, Ifname: p.Ifname, Placement: PlacementFor(st.Mode)})
	}
	return out
}

// PlacementFor returns where eBPF programs go in a lab of this mode.
func PlacementFor(mode string) string {
	if p, ok := ebpfPlacement[mode]; ok {
		return p
	}
	return PlacementHost
}

func (p ebpfProvider) Install(st *lab.State, c *Config) error { return p.sync(st, c) }

// Update makes the maps and attachments match c (the maps are the truth,
// so old is not needed).
func (p ebpfProvider) Update(st *lab.State, _, c *Config) error { return p.sync(st, c) }

func (ebpfProvider) sync(st *lab.State, c *Config) error {
	dp, err := OpenEBPF(st.Name)
	if err != nil {
		return err
	}
	defer dp.Close()
	want := map[Key]bool{}
	for _, s := range c.All() {
		want[s.Key()] = true
		if err := dp.AddService(s); err != nil {
			return fmt.Errorf("add %s: %w", s, err)
		}
	}
	have, err := dp.ListServices()
	if err != nil {
		return err
	}
	for _, k := range have {
		if !want[k] {
			if err := dp.DelService(k); err != nil {
				return fmt.Errorf("delete %s: %w", k, err)
			}
		}
	}
	wantEP := map[[2]string]bool{}
	for _, e := range c.Endpoints {
		wantEP[[2]string{e.NS, e.Ifname}] = true
		if err := dp.AttachEndpoint(e.NS, e.Ifname, e.Placement); err != nil {
			return fmt.Errorf("attach %s/%s: %w", e.NS, e.Ifname, err)
		}
	}
	attached, err := dp.ListEndpoints()
	if err != nil {
		return err
	}
	for _, e := range attached {
		if !wantEP[[2]string{e.NS, e.Ifname}] {
			if err := dp.DetachEndpoint(e.NS, e.Ifname); err != nil {
				return fmt.Errorf("detach %s/%s: %w", e.NS, e.Ifname, err)
			}
		}
	}
	return nil
}

func (ebpfProvider) Remove(st *lab.State, _ *Config) error {
	if OpenEBPF == nil {
		return nil
	}
	dp, err := OpenEBPF(st.Name)
	if err != nil {
		return err
	}
	defer dp.Close()
	eps, err := dp.ListEndpoints()
	if err != nil {
		return err
	}
	for _, e := range eps {
		if err := dp.DetachEndpoint(e.NS, e.Ifname); err != nil {
			return err
		}
	}
	keys, err := dp.ListServices()
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := dp.DelService(k); err != nil {
			return err
		}
	}
	return nil
}

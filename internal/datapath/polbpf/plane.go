package polbpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
)

// Frontends are the Service plane's frontend maps (tcbpf.FrontendMaps: lb.h's
// lb_services and lb6_services). A pod's egress to one of their entries is
// decided at the backend, after translation; nil: no Service is translated
// by tc programs (none, or translated at the socket).
type Frontends struct {
	V4, V6 *ebpf.Map
}

// Plane is a policy data plane whose maps are pinned in one directory.
type Plane struct {
	dir   string
	fe    Frontends
	maps  policyMaps
	spec  *ebpf.CollectionSpec
	progs *policyPrograms
	life  FlowLifetimes // the programs' flow lifetimes, set when they load
	// track holds the entries of the rules last loaded, pod by pod, and
	// the keys changed since each slot was written; valid says which
	// slots hold what this Plane's Load last wrote there (else the slot's
	// maps are read back).
	track    *tracker
	valid    [2]bool
	wroteGen uint32 // the generation its last Load put in force
}

// mapsOnly are the pinned maps: every map but the frontends, which only the
// programs hold.
type mapsOnly struct {
	Pol4Eps     *ebpf.Map `ebpf:"pol4_eps"`
	Pol4Flows   *ebpf.Map `ebpf:"pol4_flows"`
	Pol4Frags   *ebpf.Map `ebpf:"pol4_frags"`
	Pol4Ipcache *ebpf.Map `ebpf:"pol4_ipcache"`
	Pol6Eps     *ebpf.Map `ebpf:"pol6_eps"`
	Pol6Flows   *ebpf.Map `ebpf:"pol6_flows"`
	Pol6Frags   *ebpf.Map `ebpf:"pol6_frags"`
	Pol6Ipcache *ebpf.Map `ebpf:"pol6_ipcache"`
	PolGen      *ebpf.Map `ebpf:"pol_gen"`
	PolRules    *ebpf.Map `ebpf:"pol_rules"`
	PolStats    *ebpf.Map `ebpf:"pol_stats"`
}

// ipv6Maps are the plane's preallocated IPv6 maps: made with one entry on
// a plane for IPv4 only (OpenFamily), where no packet reaches them. At full
// size they were 14.9 of a node's 26.6 MB of pinned policy maps on an IPv4
// cluster. The tries and the endpoints' hash allocate per entry, so they
// keep their size.
var ipv6Maps = []string{policyMapPol6Flows, policyMapPol6Frags}

// Open opens the maps pinned in dir, creating them (and dir) for both
// families the first time: OpenFamily(dir, family.Dual, fe).
func Open(dir string, fe Frontends) (*Plane, error) { return OpenFamily(dir, family.Dual, fe) }

// OpenFamily opens the maps pinned in dir, creating them (and dir, and
// bpffs's mount at tcbpf.BPFFS when there is none) the first time for the
// pods' family fam. Maps already pinned keep the size they were made with
// (tcbpf.SizeMaps). fe are the Service frontends the programs will consult
// (Attach loads them; UseFrontends gives them later). The caller keeps fe
// open until Close.
func OpenFamily(dir string, fam family.Family, fe Frontends) (*Plane, error) {
	if err := tcbpf.MountBPFFS(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("policy pin directory: %w", err)
	}
	spec, err := loadPolicy()
	if err != nil {
		return nil, err
	}
	if err := tcbpf.SizeMaps(spec, dir, fam.HasIPv6(), ipv6Maps...); err != nil {
		return nil, err
	}
	var m mapsOnly
	if err := spec.LoadAndAssign(&m, &ebpf.CollectionOptions{Maps: ebpf.MapOptions{PinPath: dir}}); err != nil {
		if errors.Is(err, ebpf.ErrMapIncompatible) {
			return nil, fmt.Errorf("policy maps pinned in %s were made by another vnetlab build (%v): remove them (remove the policies, or the lab)", dir, err)
		}
		return nil, fmt.Errorf("policy maps: %w", err)
	}
	p := &Plane{dir: dir, fe: fe, spec: spec, life: DefaultFlowLifetimes}
	p.maps = policyMaps{Pol4Eps: m.Pol4Eps, Pol4Flows: m.Pol4Flows, Pol4Frags: m.Pol4Frags, Pol4Ipcache: m.Pol4Ipcache,
		Pol6Eps: m.Pol6Eps, Pol6Flows: m.Pol6Flows, Pol6Frags: m.Pol6Frags, Pol6Ipcache: m.Pol6Ipcache,
		PolGen: m.PolGen, PolRules: m.PolRules, PolStats: m.PolStats}
	return p, nil
}

// UseFrontends gives the programs the Service frontends, before the first
// Attach of this process loads them.
func (p *Plane) UseFrontends(fe Frontends) { p.fe = fe }

// Dir is the plane's pin directory.
func (p *Plane) Dir() string { return p.dir }

// programs loads the two programs once, on the pinned maps and the
// frontends given to Open, with the plane's flow lifetimes.
func (p *Plane) programs() (*policyPrograms, error) {
	if p.progs != nil {
		return p.progs, nil
	}
	repl := map[string]*ebpf.Map{
		"pol4_eps": p.maps.Pol4Eps, "pol4_flows": p.maps.Pol4Flows, "pol4_frags": p.maps.Pol4Frags, "pol4_ipcache": p.maps.Pol4Ipcache,
		"pol6_eps": p.maps.Pol6Eps, "pol6_flows": p.maps.Pol6Flows, "pol6_frags": p.maps.Pol6Frags, "pol6_ipcache": p.maps.Pol6Ipcache,
		"pol_gen": p.maps.PolGen, "pol_rules": p.maps.PolRules, "pol_stats": p.maps.PolStats,
	}
	if p.fe.V4 != nil {
		repl["pol4_frontends"] = p.fe.V4
	}
	if p.fe.V6 != nil {
		repl["pol6_frontends"] = p.fe.V6
	}
	// The frontends have the size their plane was made with: an IPv4-only
	// plane's IPv6 ones hold one entry (tcbpf.SizeMaps).
	for name, m := range repl {
		if ms, ok := p.spec.Maps[name]; ok {
			ms.MaxEntries = m.MaxEntries()
		}
	}
	if err := p.setFlowLifetimes(p.life); err != nil {
		return nil, err
	}
	var progs policyPrograms
	if err := p.spec.LoadAndAssign(&progs, &ebpf.CollectionOptions{MapReplacements: repl}); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("the kernel's verifier rejected vnetlab's policy programs: %+v", ve)
		}
		return nil, fmt.Errorf("policy programs: %w", err)
	}
	p.progs = &progs
	return p.progs, nil
}

// Close releases this process's handles; pinned maps and links stay.
func (p *Plane) Close() error {
	var errs []error
	if p.progs != nil {
		errs = append(errs, p.progs.Close())
	}
	for _, m := range []*ebpf.Map{p.maps.Pol4Eps, p.maps.Pol4Flows, p.maps.Pol4Frags, p.maps.Pol4Ipcache,
		p.maps.Pol6Eps, p.maps.Pol6Flows, p.maps.Pol6Frags, p.maps.Pol6Ipcache, p.maps.PolGen, p.maps.PolRules, p.maps.PolStats} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// Remove detaches every link pinned in dir and deletes the directory (its
// maps go with the last program using them).
func Remove(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	errs := []error{detachAll(dir)}
	errs = append(errs, os.RemoveAll(dir))
	return errors.Join(errs...)
}

// Exists says whether dir holds a policy plane.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "pol_gen"))
	return err == nil
}

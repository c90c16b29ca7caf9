package labpolicy

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polbpf"
	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
)

// ebpf: vnetlab's own tc programs on every pod's interface (its eth0, in
// its namespace), thin over internal/datapath/polbpf, which holds the
// programs, their maps and every write (bpf/policy.h has the design): a
// decision per new flow from an LPM trie keyed by the pod's identity, the
// peer's identity (from an LPM ipcache of pods' addresses and ipBlock
// prefixes), the protocol and a port prefix; established flows and
// replies pass by a flow map. The maps are one set per lab, pinned under
// the lab's bpffs directory (policy/), read by the programs of every node.
// A pod's egress to a Service frontend of the lab's eBPF Service plane is
// decided at the backend's interface, after translation.
type ebpfProvider struct{}

func init() { Register(ebpfProvider{}) }

func (ebpfProvider) Info() Info {
	return Info{Name: EBPF, Summary: "vnetlab's tc programs on each pod's eth0: identities, an LPM trie of {pod, peer identity, direction, protocol, port prefix}, an LPM ipcache for ipBlocks, a flow map for established flows", Stages: []string{"tc_bpf"}}
}

func (ebpfProvider) Supports(m modes.Mode, _ map[string]string) string {
	if m.Podless {
		return "mode " + m.Name + " has no pods to isolate"
	}
	if !m.Policies.PodIf {
		return "not wired for this mode yet (works with: " + strings.Join(modes.NamesWhere(func(m modes.Mode) bool { return m.Policies.PodIf }), ", ") + ")"
	}
	return ""
}

// CheckLab refuses a lab whose Services the node's netfilter translates:
// the programs decide a pod's egress at its interface, before that
// translation, so they would judge the clusterIP instead of the backend.
func (ebpfProvider) CheckLab(st *lab.State) string {
	c, err := labservice.Load(st.Name)
	if err != nil || !c.Installed || c.Count() == 0 {
		return ""
	}
	if p, err := labservice.Get(c.Provider); err == nil && p.Info().NodeNAT {
		return fmt.Sprintf("its Services are translated by the node's %s after a packet leaves the pod's interface, where the ebpf programs decide a pod's egress (they would judge the clusterIP, not the backend): use Service provider %s or %s, or policy provider %s", c.Provider, labservice.EBPF, labservice.EBPFSock, NFTables)
	}
	return ""
}

// ebpfDir is where a lab's policy maps and links are pinned: inside the
// lab's bpffs directory, which its teardown removes.
func ebpfDir(st *lab.State) string { return filepath.Join(tcbpf.PinDir(st.Name), "policy") }

// openPlane opens the lab's policy plane (its maps made at the first).
func openPlane(st *lab.State) (*polbpf.Plane, error) {
	return polbpf.OpenFamily(ebpfDir(st), st.Spec.Family, polbpf.Frontends{})
}

// withPlane opens the lab's policy plane for do.
func withPlane(st *lab.State, do func(*polbpf.Plane) error) error {
	pl, err := openPlane(st)
	if err != nil {
		return err
	}
	defer pl.Close()
	return do(pl)
}

// load makes r the lab's rules (counters zeroed first on an install), then
// puts the programs on every pod's interface that has none, with the lab's
// Service frontends (the Service plane's maps, created if the lab has none
// yet: tcbpf.FrontendMaps).
func load(pl *polbpf.Plane, st *lab.State, r *netpol.Rules, changes []netpol.PodChange, install bool) error {
	if install {
		if err := pl.ResetCounters(); err != nil {
			return err
		}
	}
	if _, err := pl.LoadChanges(r, changes); err != nil {
		return err
	}
	var missing []lab.PodState
	for _, p := range st.Pods {
		if !pl.Has(polbpf.Interface{NS: p.NS, Ifname: p.Ifname}) {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	v4, v6, err := tcbpf.FrontendMaps(st.Name)
	if err != nil {
		return err
	}
	defer v4.Close()
	defer v6.Close()
	pl.UseFrontends(polbpf.Frontends{V4: v4, V6: v6})
	for _, p := range missing {
		if err := pl.Attach(polbpf.Interface{NS: p.NS, Ifname: p.Ifname}); err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
	}
	return nil
}

func (ebpfProvider) Install(st *lab.State, r *netpol.Rules) error {
	return withPlane(st, func(pl *polbpf.Plane) error { return load(pl, st, r, nil, true) })
}

func (ebpfProvider) Update(st *lab.State, _, r *netpol.Rules, _ []netpol.PodChange) error {
	return withPlane(st, func(pl *polbpf.Plane) error { return load(pl, st, r, nil, false) })
}

// Hold keeps the lab's plane open for a Session: it remembers what it
// wrote, so that a change writes only the keys that differ (polbpf's
// Load) rather than every key of a plane opened afresh.
func (ebpfProvider) Hold(st *lab.State) (Writer, error) {
	pl, err := openPlane(st)
	if err != nil {
		return nil, err
	}
	return heldPlane{pl: pl, st: st}, nil
}

// heldPlane is the plane a Session holds.
type heldPlane struct {
	pl *polbpf.Plane
	st *lab.State
}

func (h heldPlane) Write(old, r *netpol.Rules, changes []netpol.PodChange) error {
	return load(h.pl, h.st, r, changes, old == nil)
}

func (h heldPlane) Close() error { return h.pl.Close() }

func (ebpfProvider) Remove(st *lab.State) error { return polbpf.Remove(ebpfDir(st)) }

// Prove counts the map entries in force and reads the programs' counters
// (since Install). The maps are the lab's, one set for every node.
func (ebpfProvider) Prove(st *lab.State) (Proof, error) {
	if !polbpf.Exists(ebpfDir(st)) {
		return Proof{}, errors.New("policy provider ebpf: no policy maps in lab " + st.Name)
	}
	r, err := SavedRules(st)
	if err != nil {
		return Proof{}, err
	}
	// One plane per lab (its maps are shared by every pod's programs).
	pr := Proof{Want: polbpf.Compile(r).Count()}
	err = withPlane(st, func(pl *polbpf.Plane) error {
		n, err := pl.Objects()
		if err != nil {
			return err
		}
		c, err := pl.Counters()
		if err != nil {
			return err
		}
		pr.Objects, pr.Evaluated, pr.Denied = n, c.Evaluated(), c.Dropped()
		return nil
	})
	return pr, err
}

package tcbpf

import "github.com/cilium/ebpf"

// What the external tests (package ebpf_test, which build labs through
// internal/datapath/modes and so cannot be inside this package) reach inside: the
// loaded programs and maps, to run them on crafted packets and read them.

// Objects returns the plane's programs and maps.
func (p *Plane) Objects() *serviceObjects { return &p.objs }

// Fold16 is the IPv6 clusterIP prefilter's key of an address.
var Fold16 = fold16

// KeptTCP is the prefilters' mark of a key a TCP Service left.
const KeptTCP = keptTCP

// The conntrack map's key and value.
type (
	CtKey = serviceLbCtKey
	Ct    = serviceLbCt
)

// LoadPrivate loads the programs with private, unpinned maps.
func LoadPrivate() (*Plane, error) {
	spec, err := loadService()
	if err != nil {
		return nil, err
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone
	}
	p := &Plane{lab: "unit"}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// NpCt is a NodePort conntrack value (bpf/nodeport.h).
type NpCt = serviceNpCt

// SlotKey is lb_slots' key; BackendOfSlotKey the backend it names.
type SlotKey = serviceLbSlotKey

func BackendOfSlotKey(k SlotKey) Backend { return Backend{IP: addrOf(k.Ip), Port: portOf(k.Port)} }

package netpolicy

import (
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
)

// Backend realises the compiled rules of a node's pods in the node: the
// data path of the CNI mode (nftables on veth-routed and bridge, in the
// node's forward hook; eBPF on veth-ebpf, on the pods' own interfaces:
// ebpf.go). Sync hands it the whole wanted state each time.
type Backend interface {
	// Name names the data path in logs.
	Name() string
	// Everywhere: the backend needs the rules of every pod of the cluster,
	// not only the node's own (false: the node's pods' rules alone, their
	// peers from every pod).
	Everywhere() bool
	// Apply makes the node's rules r (only what differs from the last
	// Apply need change); changes are the pods whose rules changed since
	// the last Apply (the compiler's Changes, with the Allows that came and
	// went where it knows them). attach are the node's own pods that are
	// not being deleted, by namespace/name.
	Apply(r *netpol.Rules, changes []netpol.PodChange, attach map[string]bool) error
}

// nftBackend writes the table of internal/datapath/polnft into the
// namespace the controller runs in: the whole table at the first Apply (and
// after a failed one), then one transaction of what the pods whose rules
// changed since the last Apply change (polnft.Apply), none when none did.
type nftBackend struct {
	ns   string        // "": the controller's own
	last *netpol.Rules // the rules in force; nil: unknown
}

// NewNFTables is the nftables backend in namespace ns ("": the caller's).
func NewNFTables(ns string) Backend { return &nftBackend{ns: ns} }

func (b *nftBackend) Name() string { return "nftables (table inet " + polnft.Table + ")" }

func (b *nftBackend) Everywhere() bool { return false }

// Apply keeps r: a Compiler's rules of a pod that changes are new values,
// so those of the last Apply still say what is in force. After a failed
// Apply the whole table is loaded (the changes since are lost with it).
func (b *nftBackend) Apply(r *netpol.Rules, changes []netpol.PodChange, _ map[string]bool) error {
	var err error
	if b.last == nil {
		err = polnft.Load(b.ns, polnft.Script(r))
	} else {
		err = polnft.Apply(changes, r)(b.ns)
	}
	if err != nil {
		b.last = nil
		return err
	}
	b.last = r
	return nil
}

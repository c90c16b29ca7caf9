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
	// Apply need change). attach are the node's own pods that are not
	// being deleted, by namespace/name.
	Apply(r *netpol.Rules, attach map[string]bool) error
}

// nftBackend writes the table of internal/datapath/polnft into the
// namespace the controller runs in, in one nft transaction, when its text
// changed.
type nftBackend struct {
	ns   string // "": the controller's own
	last string
}

// NewNFTables is the nftables backend in namespace ns ("": the caller's).
func NewNFTables(ns string) Backend { return &nftBackend{ns: ns} }

func (b *nftBackend) Name() string { return "nftables (table inet " + polnft.Table + ")" }

func (b *nftBackend) Everywhere() bool { return false }

func (b *nftBackend) Apply(r *netpol.Rules, _ map[string]bool) error {
	script := polnft.Script(r)
	if script == b.last {
		return nil
	}
	if err := polnft.Load(b.ns, script); err != nil {
		return err
	}
	b.last = script
	return nil
}

package netpolicy

import (
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
)

// Backend realises the compiled rules of a node's own pods in the node: the
// data path of the CNI mode (nftables on veth-routed and bridge; an eBPF
// backend on veth-ebpf is one more implementation). Sync hands it the whole
// wanted state each time.
type Backend interface {
	// Name names the data path in logs.
	Name() string
	// Apply makes the node's rules r (only what differs from the last
	// Apply need change).
	Apply(r *netpol.Rules) error
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

func (b *nftBackend) Apply(r *netpol.Rules) error {
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

package labpolicy

import (
	"fmt"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// nftables: the shape of SIG Network's kube-network-policies, in every
// node's namespace: the table internal/datapath/polnft writes (its package
// comment describes it), the whole table loaded in one nft transaction at
// Install and at every Update.
type nftablesProvider struct{}

func init() { Register(nftablesProvider{}) }

// NftTable is the table the nftables policy provider owns in each node.
const NftTable = polnft.Table

func (nftablesProvider) Info() Info {
	return Info{Name: NFTables, Summary: "kube-network-policies' shape: table inet vnetlab-netpol in each node, conntrack established first, verdict maps of isolated pods' addresses to per-pod chains of sets"}
}

func (nftablesProvider) Supports(m modes.Mode, options map[string]string) string {
	return nodeFilterSupports(m, options)
}

func (nftablesProvider) Install(st *lab.State, r *netpol.Rules) error {
	script := nftPolicyScript(r)
	return st.EachNode(func(ns string) error { return nftLoad(ns, script) })
}

func (p nftablesProvider) Update(st *lab.State, _, r *netpol.Rules) error { return p.Install(st, r) }

func (nftablesProvider) Remove(st *lab.State) error { return st.EachNode(polnft.Remove) }

func nftLoad(ns, script string) error { return polnft.Load(ns, script) }

// nftPolicyScript is the whole table for r, replacing any table there.
func nftPolicyScript(r *netpol.Rules) string { return polnft.Script(r) }

// Prove is not written yet (the policies knob's proof, issue 44 item 4).
func (nftablesProvider) Prove(st *lab.State) (Proof, error) {
	return Proof{}, fmt.Errorf("policy provider %s: reading its objects back is not written yet", NFTables)
}

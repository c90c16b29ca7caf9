package labpolicy

import (
	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
)

// nftables: the shape of SIG Network's kube-network-policies, in every
// node's namespace: the table internal/datapath/polnft writes (its package
// comment describes it), the whole table loaded in one nft transaction at
// Install, and at every Update one transaction of what the changed pods
// change (polnft.Apply: their Allows' rules deleted, or their Delta; the
// whole table when a node refuses it).
type nftablesProvider struct{}

func init() { Register(nftablesProvider{}) }

// NftTable is the table the nftables policy provider owns in each node.
const NftTable = polnft.Table

func (nftablesProvider) Info() Info {
	return Info{Name: NFTables, Summary: "kube-network-policies' shape: table inet vnetlab-netpol in each node, conntrack established first, verdict maps of isolated pods' addresses to per-pod chains, their rules of sets in bucket chains by hash", Stages: []string{"tables", "nf_sets"}}
}

func (nftablesProvider) Supports(m modes.Mode, options map[string]string) string {
	return nodeFilterSupports(m, options)
}

func (nftablesProvider) Install(st *lab.State, r *netpol.Rules) error {
	script := polnft.Script(r)
	return st.EachNode(func(ns string) error { return polnft.Load(ns, script) })
}

func (nftablesProvider) Update(st *lab.State, _, r *netpol.Rules, changes []netpol.PodChange) error {
	return st.EachNode(polnft.Apply(changes, r))
}

func (nftablesProvider) Remove(st *lab.State) error { return st.EachNode(polnft.Remove) }

// Prove reads the table back from every node: its rules and its maps'
// elements against what the lab's compiled policies make, and the pod
// chains' counters.
func (nftablesProvider) Prove(st *lab.State) (Proof, error) {
	r, err := SavedRules(st)
	if err != nil {
		return Proof{}, err
	}
	per := polnft.Objects(polnft.Script(r))
	var p Proof
	err = st.EachNode(func(ns string) error {
		p.Want += per
		h, err := polnft.Read(ns)
		if err != nil {
			return err
		}
		p.Objects += h.Objects
		p.Evaluated += h.Evaluated
		p.Denied += h.Denied
		return nil
	})
	return p, err
}

package labpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/datapath/polnft"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/system/proc"
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

// Prove reads the table back from every node (nft -j list table): its
// rules and its maps' elements against what the lab's compiled policies
// make, and the pod chains' counters.
func (nftablesProvider) Prove(st *lab.State) (Proof, error) {
	r, err := SavedRules(st)
	if err != nil {
		return Proof{}, err
	}
	per := nftObjects(nftPolicyScript(r))
	var p Proof
	err = st.EachNode(func(ns string) error {
		p.Want += per
		out, err := proc.Command(context.Background(), ns, "nft", "-j", "list", "table", "inet", NftTable).Output()
		if err != nil {
			return fmt.Errorf("nft list table in %s: %w", ns, err)
		}
		return nftReadBack(out, &p)
	})
	return p, err
}

// nftObjects counts a script's rules and map elements.
func nftObjects(script string) int {
	n := 0
	for _, l := range strings.Split(script, "\n") {
		switch {
		case strings.HasPrefix(l, "add rule "):
			n++
		case strings.HasPrefix(l, "add element "):
			n += strings.Count(l, ",") + 1
		}
	}
	return n
}

// nftReadBack adds what nft's JSON listing of the table holds to p: each
// rule and each element of its maps, and the counters of the rules
// commented polnft.Evaluated and polnft.Denied.
func nftReadBack(listing []byte, p *Proof) error {
	var doc struct {
		Nftables []struct {
			Map *struct {
				Elem []json.RawMessage `json:"elem"`
			} `json:"map"`
			Rule *struct {
				Comment string `json:"comment"`
				Expr    []struct {
					Counter *struct {
						Packets uint64 `json:"packets"`
					} `json:"counter"`
				} `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(listing, &doc); err != nil {
		return fmt.Errorf("nft's JSON listing: %v", err)
	}
	for _, o := range doc.Nftables {
		if o.Map != nil {
			p.Objects += len(o.Map.Elem)
		}
		if o.Rule == nil {
			continue
		}
		p.Objects++
		for _, e := range o.Rule.Expr {
			if e.Counter == nil {
				continue
			}
			switch o.Rule.Comment {
			case polnft.Evaluated:
				p.Evaluated += e.Counter.Packets
			case polnft.Denied:
				p.Denied += e.Counter.Packets
			}
		}
	}
	return nil
}

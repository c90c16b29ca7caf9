package tcbpf

import (
	"net/netip"

	"github.com/cilium/ebpf"
)

// Flow is one conntrack entry in the forward direction.
type Flow struct {
	Client  netip.AddrPort `json:"client"`
	Service netip.AddrPort `json:"service"`
	Proto   Proto          `json:"proto"`
	Backend netip.AddrPort `json:"backend"`
	Hairpin bool           `json:"hairpin,omitempty"`
}

// Flows lists the conntrack's forward entries, IPv4 then IPv6 (at most
// limit; 0 = all).
func (p *Plane) Flows(limit int) ([]Flow, error) {
	out, err := appendFlows(nil, p.objs.LbConntrack, limit, func(k *serviceLbCtKey, v *serviceLbCt) (Flow, bool) {
		return Flow{Client: addrPort(addrOf(k.Saddr), k.Sport), Service: addrPort(addrOf(k.Daddr), k.Dport), Proto: Proto(k.Proto),
			Backend: addrPort(addrOf(v.Addr), v.Port), Hairpin: v.Flags&ctHairpin != 0}, k.Dir == ctFwd
	})
	if err != nil {
		return nil, err
	}
	return appendFlows(out, p.objs.Lb6Conntrack, limit, func(k *serviceLb6CtKey, v *serviceLb6Ct) (Flow, bool) {
		return Flow{Client: addrPort(addrOf6(k.Saddr), k.Sport), Service: addrPort(addrOf6(k.Daddr), k.Dport), Proto: Proto(k.Proto),
			Backend: addrPort(addrOf6(v.Addr), v.Port)}, k.Dir == ctFwd
	})
}

// appendFlows appends to out the entries of conntrack map m that flow
// makes a Flow of (its forward entries), until out holds limit (0: no
// limit): one walk for either family's conntrack.
func appendFlows[K, V any](out []Flow, m *ebpf.Map, limit int, flow func(k *K, v *V) (Flow, bool)) ([]Flow, error) {
	err := walk(m, func(k *K, v *V) bool {
		if f, ok := flow(k, v); ok {
			out = append(out, f)
		}
		return limit <= 0 || len(out) < limit
	})
	return out, err
}

// Mirrors of bpf/lb.h's and bpf/nodeport.h's enums.
const (
	ctFwd     = 1
	ctRev     = 2
	ctHairpin = 1
	npSNAT    = 1
)

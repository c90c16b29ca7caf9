package lab

import (
	"fmt"
	"slices"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// The knobs that set every link of a lab (mtu, gso, gro,
// offload; internal/measure/knob) are applied once the mode has built it, over
// all of the lab's namespaces, and what the kernel kept is read back into
// the state. A setting the kernel refuses does not fail the build: the
// state's proof says why it is not applied, and a run reports the lab's
// cells "not applied" instead of measuring them.

// applyLinks applies the spec's link knobs (none: nothing to do).
func (l *Lab) applyLinks(mode modes.Mode) error {
	st := l.State
	if st.Spec.Links.IsZero() {
		return nil
	}
	proof, err := knob.Apply(st.LinkPath(mode), st.Spec.Links)
	if err != nil {
		return fmt.Errorf("link settings %s: %w", st.Spec.Links, err)
	}
	st.Links = proof
	return nil
}

// LinkPath is the lab's links as the knobs see them: every namespace;
// loopback where a podless mode's tests run over it; a tunnel's
// underlay (the ext namespace, the nodes' uplinks and underlay) apart.
func (s *State) LinkPath(mode modes.Mode) knob.Path {
	nodes := nodeNamespaces(s)
	p := knob.Path{Namespaces: append([]string{s.Ext}, nodes...), Tunnel: mode.Links.Tunnel,
		MaxMTU: mode.Links.MaxMTU, MaxMTUWhy: mode.Links.MaxMTUWhy}
	for _, pod := range s.Pods {
		p.Namespaces = append(p.Namespaces, pod.NS)
	}
	if mode.Podless {
		p.Loopback = nodes
	}
	p.Underlay = func(ns, link string) bool {
		if ns == s.Ext {
			return true
		}
		i := slices.IndexFunc(s.Nodes, func(n NodeState) bool { return n.NS == ns })
		return i >= 0 && (link == s.Nodes[i].Uplink || link == underlayIf)
	}
	return p
}

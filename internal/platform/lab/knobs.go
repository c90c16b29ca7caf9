package lab

import (
	"fmt"
	"slices"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// The lab knobs (internal/measure/knob: the links' mtu, gso, gro and
// offload, the pods' qdisc and cc, ...) are applied once the mode has
// built the lab, and what the lab holds is read back into the state. A
// setting refused does not fail the build: the state's proof says why it
// is not applied, and a run reports the lab's cells "not applied" instead
// of measuring them.

// applyKnobs applies the spec's lab knobs (none: nothing to do).
func (l *Lab) applyKnobs(mode modes.Mode) error {
	st := l.State
	if st.Spec.Knobs.IsZero() {
		return nil
	}
	proof, err := knob.Apply(st.knobPath(mode), st.Spec.Knobs)
	if err != nil {
		return fmt.Errorf("knobs %s: %w", st.Spec.Knobs, err)
	}
	st.Knobs = proof
	return nil
}

// KnobPath is the lab as its knobs see it (knobPath, under the lab's own
// mode).
func (s *State) KnobPath() (knob.Path, error) {
	mode, err := modes.Get(s.Spec.Mode)
	if err != nil {
		return knob.Path{}, err
	}
	return s.knobPath(mode), nil
}

// knobPath is the lab as its knobs see it under mode: every namespace;
// loopback where a podless mode's tests run over it; a tunnel's underlay
// (the ext namespace, the nodes' uplinks and underlay) apart; each pod
// with its node.
func (s *State) knobPath(mode modes.Mode) knob.Path {
	nodes := nodeNamespaces(s)
	p := knob.Path{Namespaces: append([]string{s.Ext}, nodes...), Tunnel: mode.Links.Tunnel,
		MaxMTU: mode.Links.MaxMTU, MaxMTUWhy: mode.Links.MaxMTUWhy}
	for _, pod := range s.Pods {
		p.Namespaces = append(p.Namespaces, pod.NS)
		node, _ := s.NSName(pod.Node)
		p.Pods = append(p.Pods, knob.Pod{NS: pod.NS, Ifname: pod.Ifname, NodeNS: node})
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

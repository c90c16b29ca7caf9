package scenario

import (
	"fmt"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// decodeSweep reads `sweep:`, a mapping of knobs (or knobs joined by +,
// gso+gro) to their values, in the file's order:
//
//	sweep:
//	  streams: [1, 2, 4, 8]
//	  mtu: [1500, 9000]
//	  gso+gro: [65536, 185000]
//	  offload: ["gro:off", "gro:on"]
func (s *Scenario) decodeSweep(n *yaml.Node) error {
	if n.Kind == 0 {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: field sweep: want KNOB: [V1, V2, ...] lines (knobs: %s)", s.file, n.Line, knob.NameList())
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		var values []string
		switch val.Kind {
		case yaml.ScalarNode:
			values = []string{val.Value}
		case yaml.SequenceNode:
			for _, v := range val.Content {
				if v.Kind != yaml.ScalarNode {
					return fmt.Errorf("%s:%d: field sweep.%s: want a list of values", s.file, v.Line, key.Value)
				}
				values = append(values, v.Value)
			}
		default:
			return fmt.Errorf("%s:%d: field sweep.%s: want a list of values", s.file, val.Line, key.Value)
		}
		a, err := knob.ParseAxis(key.Value, values)
		if err != nil {
			return fmt.Errorf("%s:%d: field sweep.%s: %v", s.file, key.Line, key.Value, err)
		}
		s.Sweep.Axes = append(s.Sweep.Axes, a)
		if err := s.Sweep.Check(); err != nil {
			return fmt.Errorf("%s:%d: field sweep.%s: %v", s.file, key.Line, key.Value, err)
		}
	}
	return nil
}

// validateKnobs checks the knobs set for every cell, at their lines.
func (s *Scenario) validateKnobs() error {
	for _, kv := range []struct {
		n knob.Name
		v *int
	}{{knob.MTU, s.MTU}, {knob.GSO, s.GSO}, {knob.GRO, s.GRO}, {knob.Load, s.Load}} {
		if kv.v == nil {
			continue
		}
		if err := knob.CheckValue(kv.n, strconv.Itoa(*kv.v)); err != nil {
			return s.errAt(string(kv.n), -1, "%v", err)
		}
	}
	if err := knob.CheckValue(knob.Offload, s.Offload); err != nil {
		return s.errAt("offload", -1, "%v", err)
	}
	if k, _ := knob.Get(string(knob.Rate)); s.Rate != "" {
		if _, err := k.Canonical(s.Rate); err != nil { // 0 too: not "unset" for a rate
			return s.errAt(string(knob.Rate), -1, "%v", err)
		}
	}
	return nil
}

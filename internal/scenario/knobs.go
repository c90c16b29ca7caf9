package scenario

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
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

// decodeKnobs reads the keys no field of Scenario has (rest): each must
// be a knob's (knob.All), set for every cell and checked as its flag is
// (Knob.Parse); any other is an unknown field. Errors are at the first
// such key's line.
func (s *Scenario) decodeKnobs(rest map[string]yaml.Node) error {
	keys := slices.SortedFunc(maps.Keys(rest), func(a, b string) int { return cmp.Compare(s.line(a, -1), s.line(b, -1)) })
	var scratch knob.Settings
	for _, key := range keys {
		k, err := knob.Get(key)
		if err != nil {
			return fmt.Errorf("%s:%d: unknown field %q (see docs/scenarios.md for the fields)", s.file, s.line(key, -1), key)
		}
		v := rest[key]
		if v.Kind != yaml.ScalarNode {
			return s.errAt(key, -1, "want one value (a sweep of several: sweep: {%s: [V1, V2]})", key)
		}
		if err := k.Parse(&scratch, v.Value); err != nil {
			// "mtu: mtu 2 is below ..." as the flag's reads, after "field mtu: "
			return s.errAt(key, -1, "%s", strings.TrimPrefix(field.Rendered(err, field.Key).Error(), key+": "))
		}
		if s.Knobs == nil {
			s.Knobs = map[knob.Name]string{}
		}
		s.Knobs[k.Name] = v.Value
	}
	return nil
}

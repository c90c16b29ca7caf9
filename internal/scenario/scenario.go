// Package scenario reads scenario YAML files: everything the flags of `up`
// and `run` can say, in a file (documented in docs/scenarios.md).
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/engine"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
	"github.com/vnetlab/vnetlab/internal/platform/lab"
	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
	"github.com/vnetlab/vnetlab/internal/results/analysis"
	"github.com/vnetlab/vnetlab/internal/runner"
	"github.com/vnetlab/vnetlab/internal/system/cpupin"
	"github.com/vnetlab/vnetlab/internal/vocab/family"
	"github.com/vnetlab/vnetlab/internal/vocab/field"
)

// Scenario is one file.
type Scenario struct {
	Description string               `yaml:"description"`
	Seed        string               `yaml:"seed"`
	Name        string               `yaml:"name"`
	Mode        string               `yaml:"mode"`
	Modes       []runner.ModeVariant `yaml:"-"`
	Pods        []lab.PodSpec        `yaml:"-"`
	PodCount    *int                 `yaml:"-"`
	PodCIDR     string               `yaml:"pod_cidr"`
	Nodes       *int                 `yaml:"nodes"`
	// IPFamily: ipv4, ipv6 or dual (--ip-family); PodCIDR6 the pods' IPv6
	// network (--pod-cidr6).
	IPFamily     string            `yaml:"ip_family"`
	PodCIDR6     string            `yaml:"pod_cidr6"`
	UnderlayRate string            `yaml:"underlay_rate"`
	Options      map[string]string `yaml:"options"`
	Paths        []string          `yaml:"paths"`
	Tests        []string          `yaml:"tests"`
	Engine       string            `yaml:"engine"`
	Duration     string            `yaml:"duration"`
	Repeat       *int              `yaml:"repeat"`
	Warmup       *int              `yaml:"warmup"`
	// Order (random, fixed) and OrderSeed: the cells' order in each round;
	// Precision ("2%") and MaxTime: a precision run (run --precision).
	Order     string  `yaml:"order"`
	OrderSeed *uint64 `yaml:"order_seed"`
	Precision string  `yaml:"precision"`
	MaxTime   string  `yaml:"max_time"`
	Duet      bool    `yaml:"duet"` // run --duet
	// Knobs are the knobs' keys the file sets (docs/knobs.md),
	// each a key named as its knob (knob.All: streams, size, mtu, ...),
	// checked and read through the registry (knobs.go); a sweep gives
	// cells values of their own.
	Knobs       map[knob.Name]string `yaml:"-"`
	Sweep       knob.Sweep           `yaml:"-"`
	SweepCross  bool                 `yaml:"sweep_cross"`
	CPUAffinity string               `yaml:"cpu_affinity"` // run --cpu-affinity: auto, none, N or C,S
	Output      string               `yaml:"output"`
	Report      string               `yaml:"report"`       // also write the report into this directory
	Baseline    string               `yaml:"baseline"`     // mode label the others are compared with
	CVThreshold *float64             `yaml:"cv_threshold"` // noisy above this coefficient of variation
	CIMethod    string               `yaml:"ci_method"`    // bootstrap-median or student-t-mean
	// Services: provider for `up`, providers for `run`, the
	// services themselves and how many generated ones come with them.
	Provider      string            `yaml:"provider"`
	Providers     []string          `yaml:"providers"`
	Services      []labservice.Spec `yaml:"services"`
	ExtraServices IntList           `yaml:"extra_services"`
	// PolicyProviders enforce the policy knobs (policies, ipblocks), a
	// cell coordinate each (run --policy-providers).
	PolicyProviders []string `yaml:"policy_providers"`
	// Profile: sample where the CPU goes in every measured window (run
	// --profile); ProfileDir: where each cell's stacks are written.
	Profile    bool   `yaml:"profile"`
	ProfileDir string `yaml:"profile_dir"`
	// Cells keeps only the matrix cells matching these patterns (run only).
	Cells []string `yaml:"cells"`
	// Kube makes the file a cluster run (`vnetlab kube run -f`, kube.go).
	Kube *Kube `yaml:"kube"`

	file string
	root *yaml.Node
}

// raw mirrors Scenario with the polymorphic fields left as nodes.
type raw struct {
	Scenario `yaml:",inline"`
	RawModes yaml.Node `yaml:"modes"`
	RawPods  yaml.Node `yaml:"pods"`
	RawSweep yaml.Node `yaml:"sweep"`
	// Rest are the keys no field has: the knobs' (decodeKnobs), or
	// unknown.
	Rest map[string]yaml.Node `yaml:",inline"`
}

// Load reads and validates a scenario file. Errors name the file, the line
// and the field.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	return Parse(path, b)
}

var lineRE = regexp.MustCompile(`line (\d+): (.*)`)

// Parse reads a scenario from bytes (path is used in messages).
func Parse(path string, b []byte) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return nil, yamlErr(path, err)
	}
	if len(root.Content) == 0 {
		return nil, fmt.Errorf("%s: empty scenario file", path)
	}
	var r raw
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		return nil, yamlErr(path, err)
	}
	s := r.Scenario
	s.file, s.root = path, root.Content[0]
	if err := s.decodeKnobs(r.Rest); err != nil {
		return nil, err
	}
	if err := s.decodeModes(&r.RawModes); err != nil {
		return nil, err
	}
	if err := s.decodePods(&r.RawPods); err != nil {
		return nil, err
	}
	if err := s.decodeSweep(&r.RawSweep); err != nil {
		return nil, err
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func yamlErr(path string, err error) error {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = field.OneLine(strings.TrimPrefix(msg, "yaml: ")) // the decoder quotes the input it refused
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		detail := m[2]
		if f := regexp.MustCompile(`field (\S+) not found in type (\S+)`).FindStringSubmatch(detail); f != nil {
			name := f[1]
			if f[2] == "scenario.Kube" {
				name = "kube." + name
			}
			detail = fmt.Sprintf("unknown field %q (see docs/scenarios.md for the fields)", name)
		}
		return fmt.Errorf("%s:%s: %s", path, m[1], detail)
	}
	return fmt.Errorf("%s: %s", path, msg)
}

// errAt formats an error at the line of a top-level key (and list item).
func (s *Scenario) errAt(key string, idx int, format string, args ...any) error {
	line := s.line(key, idx)
	field := key
	if idx >= 0 {
		field = fmt.Sprintf("%s[%d]", key, idx)
	}
	return fmt.Errorf("%s:%d: field %s: %s", s.file, line, field, fmt.Sprintf(format, args...))
}

func (s *Scenario) line(key string, idx int) int {
	if s.root == nil || s.root.Kind != yaml.MappingNode {
		return 1
	}
	for i := 0; i+1 < len(s.root.Content); i += 2 {
		if s.root.Content[i].Value != key {
			continue
		}
		v := s.root.Content[i+1]
		if idx >= 0 && v.Kind == yaml.SequenceNode && idx < len(v.Content) {
			return v.Content[idx].Line
		}
		return s.root.Content[i].Line
	}
	return 1
}

func (s *Scenario) decodeModes(n *yaml.Node) error {
	if n.Kind == 0 {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		return fmt.Errorf("%s:%d: field modes: want a list of mode names or {name, mode, options}", s.file, n.Line)
	}
	for i, item := range n.Content {
		var mv runner.ModeVariant
		switch item.Kind {
		case yaml.ScalarNode:
			mv = runner.ModeVariant{Label: item.Value, Mode: item.Value}
		case yaml.MappingNode:
			if err := item.Decode(&mv); err != nil {
				return yamlErr(s.file, err)
			}
			for j := 0; j+1 < len(item.Content); j += 2 {
				if k := item.Content[j].Value; k != "name" && k != "mode" && k != "options" {
					return fmt.Errorf("%s:%d: field modes[%d]: unknown field %q (want name, mode, options)", s.file, item.Content[j].Line, i, k)
				}
			}
			if mv.Mode == "" {
				return fmt.Errorf("%s:%d: field modes[%d]: missing mode", s.file, item.Line, i)
			}
			if mv.Label == "" {
				mv.Label = mv.Mode
			}
		default:
			return fmt.Errorf("%s:%d: field modes[%d]: want a mode name or {name, mode, options}", s.file, item.Line, i)
		}
		s.Modes = append(s.Modes, mv)
	}
	return nil
}

func (s *Scenario) decodePods(n *yaml.Node) error {
	switch n.Kind {
	case 0:
		return nil
	case yaml.ScalarNode:
		c, err := strconv.Atoi(n.Value)
		if err != nil {
			return fmt.Errorf("%s:%d: field pods: %q is not a number or a list of {name, ip}", s.file, n.Line, n.Value)
		}
		if c < 0 {
			return fmt.Errorf("%s:%d: field pods: pod count %d is negative", s.file, n.Line, c)
		}
		s.PodCount = &c
		return nil
	case yaml.SequenceNode:
		for i, item := range n.Content {
			var p lab.PodSpec
			if item.Kind != yaml.MappingNode {
				return fmt.Errorf("%s:%d: field pods[%d]: want {name: pod-a, ip: 192.168.10.10}", s.file, item.Line, i)
			}
			for j := 0; j+1 < len(item.Content); j += 2 {
				switch item.Content[j].Value {
				case "name":
					p.Name = item.Content[j+1].Value
				case "ip":
					p.IP = item.Content[j+1].Value
				default:
					return fmt.Errorf("%s:%d: field pods[%d]: unknown field %q (want name, ip)", s.file, item.Content[j].Line, i, item.Content[j].Value)
				}
			}
			if p.Name == "" || p.IP == "" {
				return fmt.Errorf("%s:%d: field pods[%d]: both name and ip are required", s.file, item.Line, i)
			}
			s.Pods = append(s.Pods, p)
		}
		return nil
	}
	return fmt.Errorf("%s:%d: field pods: want a count or a list of {name, ip}", s.file, n.Line)
}

func (s *Scenario) validate() error {
	if s.Mode != "" {
		if _, err := modes.Get(s.Mode); err != nil {
			return s.errAt("mode", -1, "%v", err)
		}
	}
	for i, mv := range s.Modes {
		if _, err := modes.Get(mv.Mode); err != nil {
			return s.errAt("modes", i, "%v", err)
		}
	}
	for i, t := range s.Tests {
		if _, err := engine.ParseTest(t); err != nil {
			return s.errAt("tests", i, "%v", err)
		}
	}
	if s.Engine != "" {
		if _, err := engine.Get(s.Engine); err != nil {
			return s.errAt("engine", -1, "%v", err)
		}
	}
	for _, d := range []struct{ key, v string }{{"duration", s.Duration}, {"max_time", s.MaxTime}} {
		if d.v != "" {
			if _, err := time.ParseDuration(d.v); err != nil {
				return s.errAt(d.key, -1, "%q is not a duration (example: 5s)", d.v)
			}
		}
	}
	if s.Precision != "" {
		if _, err := runner.ParseShare(s.Precision); err != nil {
			return s.errAt("precision", -1, "%v", err)
		}
	}
	if s.Order != "" && !slices.Contains(runner.Orders, s.Order) {
		return s.errAt("order", -1, "unknown order %q: use %s", s.Order, strings.Join(runner.Orders, " or "))
	}
	for _, kv := range []struct {
		key string
		v   *int
		min int
	}{{"repeat", s.Repeat, 1}, {"warmup", s.Warmup, 0}, {"nodes", s.Nodes, 1}} {
		if kv.v != nil && *kv.v < kv.min {
			return s.errAt(kv.key, -1, "%d is below the minimum %d", *kv.v, kv.min)
		}
	}
	if _, err := family.Parse(s.IPFamily); err != nil {
		return s.errAt("ip_family", -1, "%v", err)
	}
	if s.CPUAffinity != "" {
		if _, err := cpupin.Parse(s.CPUAffinity); err != nil {
			return s.errAt("cpu_affinity", -1, "%v", err)
		}
	}
	if s.CVThreshold != nil && *s.CVThreshold < 0 {
		return s.errAt("cv_threshold", -1, "%g is negative (example: 0.10 for 10%%)", *s.CVThreshold)
	}
	if s.CIMethod != "" && !slices.Contains(analysis.CIMethods, s.CIMethod) {
		return s.errAt("ci_method", -1, "unknown method %q (known: %s)", s.CIMethod, strings.Join(analysis.CIMethods, ", "))
	}
	if s.Name != "" {
		if err := lab.ValidName("lab", s.Name); err != nil {
			return s.errAt("name", -1, "%v", err)
		}
	}
	for i, p := range s.Pods {
		if err := lab.ValidName("pod", p.Name); err != nil {
			return s.errAt("pods", i, "%v", err)
		}
	}
	if s.Provider != "" {
		if _, err := labservice.Get(s.Provider); err != nil {
			return s.errAt("provider", -1, "%v", err)
		}
	}
	for i, p := range s.Providers {
		if _, err := labservice.Get(p); err != nil {
			return s.errAt("providers", i, "%v", err)
		}
	}
	for i, p := range s.PolicyProviders {
		if _, err := labpolicy.Get(p); err != nil {
			return s.errAt("policy_providers", i, "%v", err)
		}
	}
	for i, sv := range s.Services {
		if err := sv.Check(); err != nil {
			return s.errAt("services", i, "%v", err)
		}
	}
	for i, n := range s.ExtraServices {
		if err := labservice.CheckExtra(n); err != nil {
			return s.errAt("extra_services", i, "%v", err)
		}
	}
	return s.validateKube()
}

// IntList is a number or a list of numbers (extra_services: 1000, or [0, 1000, 10000]).
type IntList []int

// UnmarshalYAML accepts a scalar or a sequence.
func (l *IntList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var v int
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %q is not a number", n.Line, n.Value)
		}
		*l = IntList{v}
		return nil
	}
	var v []int
	if err := n.Decode(&v); err != nil {
		return fmt.Errorf("line %d: want a number or a list of numbers", n.Line)
	}
	*l = v
	return nil
}

// DurationValue returns the parsed duration or def.
func (s *Scenario) DurationValue(def time.Duration) time.Duration {
	if d, err := time.ParseDuration(s.Duration); err == nil {
		return d
	}
	return def
}

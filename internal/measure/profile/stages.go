package profile

import (
	_ "embed"
	"fmt"
	"sort"
	"strings"
	"sync"
)

//go:embed stages.rules
var stageRulesText string

// Stage kinds (stages.rules explains them).
const (
	KindNet  = "net"
	KindTask = "task"
	KindIdle = "idle"
	// KindOverhead is the profiler's own cost: not the data path's.
	KindOverhead = "overhead"
	// KindControl is configuration work (any frame decides): not the data path's.
	KindControl = "control"
)

// Counted says whether a stage kind is the data path's cost.
func Counted(kind string) bool { return kind == KindNet || kind == KindTask }

// Stages every profile may have besides those of the rules.
const (
	StageKernelOther = "kernel-other" // data-path sample no rule claims
	StageOther       = "other"        // not the data path (other processes)
)

// StageDef is one stage of the rules.
type StageDef struct {
	ID, Kind, Name string
}

// Rules attribute stacks to stages.
type Rules struct {
	Stages   []StageDef
	exact    map[string]int
	prefixes []prefixRule // longest first
	comms    map[string]int

	mu    sync.Mutex
	cache map[string]int // function -> stage index, -1 for none
}

type prefixRule struct {
	prefix string
	stage  int
}

// DefaultRules are the rules of stages.rules.
var DefaultRules = mustParseRules(stageRulesText)

func mustParseRules(text string) *Rules {
	r, err := ParseRules(text)
	if err != nil {
		panic(err)
	}
	return r
}

// ParseRules reads the stages.rules format. A pattern claimed by two stages
// is an error.
func ParseRules(text string) (*Rules, error) {
	r := &Rules{exact: map[string]int{}, comms: map[string]int{}, cache: map[string]int{}}
	seen := map[string]string{}
	ids := map[string]bool{StageKernelOther: true, StageOther: true}
	for n, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "stage" {
			if len(f) < 4 {
				return nil, fmt.Errorf("stages line %d: want \"stage ID KIND Name\"", n+1)
			}
			switch f[2] {
			case KindNet, KindTask, KindIdle, KindOverhead, KindControl:
			default:
				return nil, fmt.Errorf("stages line %d: kind %q is not net, task, idle, overhead or control", n+1, f[2])
			}
			if ids[f[1]] {
				return nil, fmt.Errorf("stages line %d: stage %q defined twice", n+1, f[1])
			}
			ids[f[1]] = true
			r.Stages = append(r.Stages, StageDef{ID: f[1], Kind: f[2], Name: strings.Join(f[3:], " ")})
			continue
		}
		if len(r.Stages) == 0 {
			return nil, fmt.Errorf("stages line %d: pattern before the first stage", n+1)
		}
		st := len(r.Stages) - 1
		for _, p := range f {
			if p == "stage" {
				// First on a line it starts a stage: a file that has it
				// elsewhere would read otherwise written one per line.
				return nil, fmt.Errorf("stages line %d: \"stage\" starts a stage's line, it is no pattern", n+1)
			}
			if prev, dup := seen[p]; dup && prev != r.Stages[st].ID {
				return nil, fmt.Errorf("stages line %d: %q is claimed by %s and %s", n+1, p, prev, r.Stages[st].ID)
			}
			seen[p] = r.Stages[st].ID
			if i := strings.IndexByte(p, '*'); i >= 0 && i != len(p)-1 {
				return nil, fmt.Errorf("stages line %d: %q: a * may only end a pattern (a prefix)", n+1, p)
			}
			switch {
			case strings.HasPrefix(p, "comm="):
				r.comms[strings.TrimPrefix(p, "comm=")] = st
			case strings.HasSuffix(p, "*"):
				r.prefixes = append(r.prefixes, prefixRule{strings.TrimSuffix(p, "*"), st})
			default:
				r.exact[p] = st
			}
		}
	}
	sort.SliceStable(r.prefixes, func(i, j int) bool { return len(r.prefixes[i].prefix) > len(r.prefixes[j].prefix) })
	return r, nil
}

// match is the stage index of a function, -1 when no rule claims it.
func (r *Rules) match(fn string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.cache[fn]; ok {
		return st
	}
	st, ok := r.exact[fn]
	if !ok {
		st = -1
		for _, p := range r.prefixes {
			if strings.HasPrefix(fn, p.prefix) {
				st = p.stage
				break
			}
		}
	}
	r.cache[fn] = st
	return st
}

// Attribute is the stage ID of a stack (see stages.rules).
func (r *Rules) Attribute(s Stack) string {
	kernel := s.Kernel()
	// A process is the test's when it runs in a lab's namespace; comm=
	// rules name the stage of such processes' user time (ovs-vswitchd runs
	// in the node).
	comm, named := r.comms[s.Comm]
	named = named && s.Lab
	engine := s.Lab
	if len(kernel) == 0 {
		switch {
		case named:
			return r.Stages[comm].ID
		case s.Lab:
			return "engine"
		}
		return StageOther
	}
	leaf, net := -1, false
	for i := len(kernel) - 1; i >= 0; i-- {
		st := r.match(kernel[i])
		if kernel[i] == BPFFrame {
			st = r.bpfCaller(kernel[:i])
		}
		if st < 0 {
			continue
		}
		if r.Stages[st].Kind == KindControl {
			return r.Stages[st].ID
		}
		if leaf < 0 {
			leaf = st
		}
		if r.Stages[st].Kind == KindNet {
			net = true
		}
	}
	switch {
	case leaf >= 0 && r.Stages[leaf].Kind == KindIdle:
		return r.Stages[leaf].ID
	case !net && !engine:
		return StageOther
	case leaf < 0:
		return StageKernelOther
	}
	return r.Stages[leaf].ID
}

// bpfCaller is the stage of JIT-compiled BPF called from callers (root
// first): profiler under a tracepoint's BPF runner, else tc/BPF.
func (r *Rules) bpfCaller(callers []string) int {
	for i := len(callers) - 1; i >= 0; i-- {
		if st := r.match(callers[i]); st >= 0 && (r.Stages[st].ID == "profiler" || r.Stages[st].ID == "tc_bpf") {
			return st
		}
	}
	return r.stageIndex("tc_bpf")
}

func (r *Rules) stageIndex(id string) int {
	for i, s := range r.Stages {
		if s.ID == id {
			return i
		}
	}
	return -1
}

// Kind is a stage ID's kind; kernel-other counts as net, other as none.
func (r *Rules) Kind(id string) string {
	for _, s := range r.Stages {
		if s.ID == id {
			return s.Kind
		}
	}
	if id == StageKernelOther {
		return KindNet
	}
	return ""
}

// Name is a stage's display name.
func (r *Rules) Name(id string) string {
	for _, s := range r.Stages {
		if s.ID == id {
			return s.Name
		}
	}
	switch id {
	case StageKernelOther:
		return "kernel, other"
	case StageOther:
		return "not the data path"
	}
	return id
}

// Order is the stage IDs in display order.
func (r *Rules) Order() []string {
	var ids []string
	for _, s := range r.Stages {
		ids = append(ids, s.ID)
	}
	return append(ids, StageKernelOther, StageOther)
}

package lab

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/measure/knob"
)

// StateRoot holds one directory per lab. It is on tmpfs, like /run/netns,
// so it disappears at reboot together with the namespaces it describes.
var StateRoot = envOr("VNETLAB_STATE_DIR", "/run/vnetlab")

// BPFRoot is where a lab's pinned eBPF objects live (one directory per lab).
var BPFRoot = "/sys/fs/bpf/vnetlab"

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// NSPrefix starts every namespace name vnetlab creates.
const NSPrefix = "vnl-"

// Mark is the ownership mark written as each namespace's loopback alias.
func Mark(lab string) string { return "vnetlab lab=" + lab }

// LabOfMark returns the lab named by a mark, or "" when it is not vnetlab's.
func LabOfMark(mark string) string {
	if !strings.HasPrefix(mark, "vnetlab lab=") {
		return ""
	}
	return strings.TrimPrefix(mark, "vnetlab lab=")
}

// State is what `ls` shows and `down` needs; written as state.json.
type State struct {
	Name     string                    `json:"name"`
	Mode     string                    `json:"mode"`
	Status   string                    `json:"status"` // building, ready
	Created  time.Time                 `json:"created"`
	OwnerPID int                       `json:"owner_pid"`
	Spec     Spec                      `json:"spec"`
	Nodes    []NodeState               `json:"nodes"`
	Ext      string                    `json:"ext_ns"`
	Pods     []PodState                `json:"pods"`
	Gateway  string                    `json:"gateway,omitempty"`
	Gateway6 string                    `json:"gateway6,omitempty"` // labs with IPv6
	Paths    map[string]modes.Endpoint `json:"paths,omitempty"`
	Facts    map[string]string         `json:"facts,omitempty"`
	// Knobs is what Spec.Knobs asked of the lab and what it holds
	// (knobs.go); nil when the spec set none.
	Knobs *knob.Proof `json:"knobs,omitempty"`
}

// ModeOf is the lab's mode, resolved from the name its state records (the
// one place a stored lab's mode name becomes the mode; a cluster's, or a
// mode this vnetlab lacks, is an error).
func (s *State) ModeOf() (modes.Mode, error) { return modes.Get(s.Mode) }

// NodeState describes a node namespace.
type NodeState struct {
	Name   string `json:"name"`
	NS     string `json:"ns"`
	IP     string `json:"ip"`
	Uplink string `json:"uplink"`
	IP6    string `json:"ip6,omitempty"` // uplink's IPv6 address (labs with IPv6)
}

// PodState describes a pod namespace.
type PodState struct {
	Name   string `json:"name"`
	NS     string `json:"ns"`
	IP     string `json:"ip"`
	Node   string `json:"node"`
	Ifname string `json:"ifname"`
	IP6    string `json:"ip6,omitempty"` // labs with IPv6 (IP is empty in an ipv6 lab)
}

// NSName returns the namespace of a pod or node by its short name.
func (s *State) NSName(who string) (string, error) {
	if who == "node" || who == "ext" {
		if who == "ext" {
			return s.Ext, nil
		}
		if len(s.Nodes) > 0 {
			return s.Nodes[0].NS, nil
		}
	}
	for _, n := range s.Nodes {
		if n.Name == who {
			return n.NS, nil
		}
	}
	for _, p := range s.Pods {
		if p.Name == who {
			return p.NS, nil
		}
	}
	var names []string
	for _, n := range s.Nodes {
		names = append(names, n.Name)
	}
	for _, p := range s.Pods {
		names = append(names, p.Name)
	}
	return "", fmt.Errorf("lab %s has no pod or node %q (has: %s)", s.Name, who, strings.Join(names, ", "))
}

func labDir(name string) string { return filepath.Join(StateRoot, "labs", name) }

// Dir is a lab's state directory (other packages keep their files there,
// e.g. the services of internal/platform/labservice).
func Dir(name string) string { return labDir(name) }

func writeState(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(labDir(st.Name), "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(labDir(st.Name), "state.json"))
}

// Load reads a lab's state.
func Load(name string) (*State, error) {
	if err := ValidName("lab", name); err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(labDir(name), "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no lab named %q (see `vnetlab ls`)", name)
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("lab %s: corrupt state (%v): run `vnetlab clean`", name, err)
	}
	return &st, nil
}

// List returns the state of every lab, sorted by name.
func List() ([]*State, error) {
	ents, err := os.ReadDir(filepath.Join(StateRoot, "labs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*State
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		st, err := Load(e.Name())
		if err != nil {
			st = &State{Name: e.Name(), Status: "broken: " + err.Error()}
		}
		out = append(out, st)
	}
	return out, nil
}

// Journal records every object before it is created, so that `clean` can
// remove it even if vnetlab is killed halfway through building it.
type Journal struct{ f *os.File }

// Entry kinds.
const (
	KindNetns = "netns" // a namespace name
	KindProc  = "proc"  // "PID STARTTIME": a process vnetlab started and must stop
	KindPin   = "pin"   // a bpffs path
	// KindCgroup: a cgroup v2 directory (socket-level Services); removed
	// once its processes are stopped.
	KindCgroup = "cgroup"
	// KindCgroupTree "PATH": a cgroup tree under a hierarchy's vnetlab-kube
	// directory (a local Kubernetes node's cgroup root): its processes are
	// killed and its directories removed.
	KindCgroupTree = "cgroup-tree"
	// KindSysctl "NAME VALUE": a machine-wide sysctl a daemon vnetlab started
	// changes (kubelet), with the value to restore once that daemon is stopped.
	KindSysctl = "sysctl"
	// KindDir "PATH": a directory outside the lab's state directory that
	// vnetlab made (or a daemon it started made) and removes.
	KindDir = "dir"
)

func openJournal(name string) (*Journal, error) {
	f, err := os.OpenFile(filepath.Join(labDir(name), "journal"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Journal{f: f}, nil
}

// Record journals one object of lab name from a process that does not hold
// its *Lab (a provider given only the state): appends are atomic, so this
// is safe next to the holder's own journal.
func Record(name, kind, value string) error {
	j, err := openJournal(name)
	if err != nil {
		return fmt.Errorf("lab %s journal: %w", name, err)
	}
	defer j.Close()
	return j.Record(kind, value)
}

// Recorder records, in lab's journal, paths about to be created under the
// kinds down and clean remove (sock.Setup's Tracker).
type Recorder string

// Cgroup records a cgroup directory.
func (r Recorder) Cgroup(path string) error { return Record(string(r), KindCgroup, path) }

// Pin records a bpffs path.
func (r Recorder) Pin(path string) error { return Record(string(r), KindPin, path) }

// Record appends one object.
func (j *Journal) Record(kind, value string) error {
	_, err := fmt.Fprintf(j.f, "%s %s\n", kind, value)
	return err
}

// RecordProc records a process we started, identified by PID and start time.
func (j *Journal) RecordProc(pid int, start uint64) error {
	return j.Record(KindProc, strconv.Itoa(pid)+" "+strconv.FormatUint(start, 10))
}

// Close closes the journal file.
func (j *Journal) Close() error { return j.f.Close() }

type journalEntry struct{ kind, value string }

func readJournal(name string) []journalEntry {
	f, err := os.Open(filepath.Join(labDir(name), "journal"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []journalEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok {
			out = append(out, journalEntry{k, v})
		}
	}
	return out
}

// lockDir takes an exclusive flock on the lab directory without waiting: a
// lab in use by another live vnetlab process is reported (EWOULDBLOCK), not
// waited for.
func lockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// globalLock serialises creating and removing lab directories.
func globalLock() (func(), error) {
	if err := os.MkdirAll(filepath.Join(StateRoot, "labs"), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(StateRoot, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = flock(f, unix.LOCK_UN); f.Close() }, nil
}

// flock waits again after EINTR: a signal may interrupt a blocking lock.
func flock(f *os.File, how int) error {
	for {
		if err := unix.Flock(int(f.Fd()), how); err != unix.EINTR {
			return err
		}
	}
}

// EachNode runs fn in turn for every node's namespace (rules a provider
// puts on every node, as kube-proxy or a policy agent runs on each),
// stopping at the first error.
func (s *State) EachNode(fn func(ns string) error) error {
	if len(s.Nodes) == 0 {
		return fmt.Errorf("lab %s has no node", s.Name)
	}
	for _, n := range s.Nodes {
		if err := fn(n.NS); err != nil {
			return err
		}
	}
	return nil
}

package profile

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Collector profiles the measured windows of a run: one Sampler, a profile
// per cell merged over the cell's valid samples.
type Collector struct {
	s     *Sampler
	cells map[string]*cellAcc
}

type cellAcc struct {
	p     Profile
	units float64
}

// NewCollector opens the sampler (hz <= 0: DefaultHz).
func NewCollector(hz int) (*Collector, error) {
	s, err := Open(hz)
	if err != nil {
		return nil, err
	}
	return &Collector{s: s, cells: map[string]*cellAcc{}}, nil
}

// Hz is the sampling rate per CPU.
func (c *Collector) Hz() int { return c.s.hz }

// Window is one sample's measured window: Start and End are called at the
// engine's marks (engine.Window), Profile after End.
type Window struct {
	s       *Sampler
	p       *Profile
	err     error
	running bool
}

// Window returns a new window on the collector's sampler, counting only
// the given network namespaces (names under /run/netns: the lab's) as the
// test's; none: every namespace but the root one.
func (c *Collector) Window(netns ...string) *Window {
	w := &Window{s: c.s}
	var inodes []uint32
	for _, name := range netns {
		ino, err := nsutil.Inode(nsutil.Path(name))
		if err != nil {
			w.err = fmt.Errorf("profile: namespace %s: %w", name, err)
			return w
		}
		inodes = append(inodes, uint32(ino))
	}
	w.err = c.s.SetLabNamespaces(inodes)
	return w
}

// Start starts sampling (the first call only).
func (w *Window) Start() {
	if w.running || w.p != nil || w.err != nil {
		return
	}
	if w.err = w.s.Start(); w.err == nil {
		w.running = true
	}
}

// End stops sampling and keeps what was sampled.
func (w *Window) End() {
	if !w.running {
		return
	}
	w.running = false
	w.p, w.err = w.s.Stop()
}

// Profile is the window's profile; nil when the window never started.
func (w *Window) Profile() (*Profile, error) {
	w.End()
	return w.p, w.err
}

// Add charges a window's profile and the work done in it (transactions, or
// MB) to a cell.
func (c *Collector) Add(cell string, p *Profile, units float64) {
	if p == nil {
		return
	}
	a, ok := c.cells[cell]
	if !ok {
		a = &cellAcc{}
		c.cells[cell] = a
	}
	a.p.Add(p)
	a.units += units
}

// Cell is a cell's merged profile and units; nil when none was added.
func (c *Collector) Cell(cell string) (*Profile, float64) {
	a, ok := c.cells[cell]
	if !ok {
		return nil, 0
	}
	return &a.p, a.units
}

// Close releases the sampler.
func (c *Collector) Close() error { return c.s.Close() }

// UnitOf is the per-unit basis of a cell's measurement unit: "transaction"
// (trans/s), "connection" (conn/s), "MB" (Gbit/s).
func UnitOf(rateUnit string) string {
	switch {
	case strings.HasPrefix(rateUnit, "trans"):
		return "transaction"
	case strings.HasPrefix(rateUnit, "conn"):
		return "connection"
	}
	return "MB"
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9.+-]+`)

// FileName makes a cell key a file name: each run of characters other than
// letters, digits, ".", "+" and "-" becomes one "_" ("veth-routed|pod||tcp_rr"
// -> "veth-routed_pod_tcp_rr").
func FileName(key string) string {
	return strings.Trim(unsafeName.ReplaceAllString(key, "_"), "_")
}

// Files are the files written for one cell, in its directory.
type Files struct {
	Pprof  string
	Folded string
	Flame  string
}

// WriteFiles writes p as name.pb.gz (pprof), name.folded and name.svg (flame
// graph of the data path) into dir.
func WriteFiles(dir, name, title string, p *Profile, r *Rules, usPerSample float64, unit string) (Files, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Files{}, err
	}
	f := Files{Pprof: name + ".pb.gz", Folded: name + ".folded", Flame: name + ".svg"}
	for _, out := range []struct {
		file  string
		write func(io.Writer) error
	}{
		{f.Pprof, func(w io.Writer) error { return WritePprof(w, p, r) }},
		{f.Folded, func(w io.Writer) error { return WriteFolded(w, p) }},
		{f.Flame, func(w io.Writer) error {
			return WriteFlameGraph(w, p, r, FlameOptions{Title: title, USPerSample: usPerSample, Unit: unit})
		}},
	} {
		var b bytes.Buffer
		if err := out.write(&b); err != nil {
			return Files{}, fmt.Errorf("%s: %w", out.file, err)
		}
		if err := os.WriteFile(filepath.Join(dir, out.file), b.Bytes(), 0o644); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}

// ReadFolded reads a folded-stacks file written by WriteFolded back into a
// profile (stacks only; hz is the caller's).
func ReadFolded(r io.Reader, hz int) (*Profile, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		if b, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	p := &Profile{Hz: hz, Events: map[string]uint64{}}
	for i, line := range strings.Split(string(b), "\n") {
		// Only blank lines are skipped: a line starts with its process's
		// name, which may be empty (" 12": a stack of no name, no frame).
		if strings.TrimSpace(line) == "" {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseUint(line[sp+1:], 10, 64)
		if sp < 0 || err != nil {
			return nil, fmt.Errorf("folded stacks line %d: want \"frame;frame count\"", i+1)
		}
		frames := strings.Split(line[:sp], ";")
		st := Stack{Comm: frames[0], Count: n}
		if c, ok := strings.CutSuffix(st.Comm, LabSuffix); ok {
			st.Comm, st.Lab = c, true
		}
		for _, fr := range frames[1:] {
			if fr == "[user "+st.Process()+"]" {
				fr = UserFrame
			}
			st.Frames = append(st.Frames, fr)
		}
		p.Stacks = append(p.Stacks, st)
	}
	return p, nil
}

// LoadStacks reads a summary's folded stacks back (for flame graphs drawn
// after the run), from its Dir (relative to resultsDir, the results file's
// directory, unless absolute), and the µs per unit one sample stands for.
func LoadStacks(resultsDir string, s *results.Profile) (*Profile, float64, error) {
	if s == nil || s.Files == nil {
		return nil, 0, fmt.Errorf("no profile files: run with --profile")
	}
	dir := s.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(resultsDir, dir)
	}
	path := filepath.Join(dir, s.Files.Folded)
	fh, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("%w (the profile files live beside the results file: keep the two together)", err)
	}
	defer fh.Close()
	p, err := ReadFolded(fh, s.Hz)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	us := 0.0
	if s.Units > 0 && s.Hz > 0 {
		us = 1e6 / float64(s.Hz) / s.Units
	}
	return p, us, nil
}

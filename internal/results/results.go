// Package results is the versioned results file written by `run` and read by
// `report` and `compare` (documented in docs/results-json.md).
package results

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/vnetlab/vnetlab/internal/engine"
)

// SchemaVersion grows only when a field changes meaning; new fields are added
// without bumping it.
const SchemaVersion = 1

// File is one run.
type File struct {
	SchemaVersion int      `json:"schema_version"`
	Metadata      Metadata `json:"metadata"`
	Cells         []*Cell  `json:"cells"`
}

// Metadata describes the machine and the run.
type Metadata struct {
	Vnetlab     string            `json:"vnetlab_version"`
	Commit      string            `json:"commit,omitempty"`
	Kernel      string            `json:"kernel"`
	CPUs        int               `json:"cpus"`
	CPUModel    string            `json:"cpu_model,omitempty"`
	Hostname    string            `json:"hostname,omitempty"`
	Tools       map[string]string `json:"tools"`
	CommandLine []string          `json:"command_line"`
	Scenario    string            `json:"scenario,omitempty"`
	Start       time.Time         `json:"start"`
	End         time.Time         `json:"end"`
	Settings    Settings          `json:"settings"`
	Skipped     []Skipped         `json:"skipped,omitempty"`
}

// Settings are the run parameters that shape every sample.
type Settings struct {
	Duration string `json:"duration"`
	Repeat   int    `json:"repeat"`
	Warmup   int    `json:"warmup"`
	Streams  int    `json:"streams,omitempty"`
	Size     int    `json:"size,omitempty"`
}

// Skipped names a matrix entry that could not run, and why.
type Skipped struct {
	Mode   string `json:"mode"`
	Reason string `json:"reason"`
}

// Cell is one matrix entry: mode x path x provider x test.
type Cell struct {
	Mode        string            `json:"mode"`
	ModeOptions map[string]string `json:"mode_options,omitempty"`
	Path        string            `json:"path"`
	Provider    string            `json:"provider"`
	Test        string            `json:"test"`
	Engine      string            `json:"engine"`
	Unit        string            `json:"unit"`
	Samples     []Sample          `json:"samples"`
	Median      float64           `json:"median"`
	Min         float64           `json:"min"`
	Max         float64           `json:"max"`
	Valid       int               `json:"valid_samples"`
	Failed      int               `json:"failed_samples"`
}

// Sample is one measurement; a failed one keeps its error and is never counted.
type Sample struct {
	engine.Result
	Valid bool      `json:"valid"`
	Error string    `json:"error,omitempty"`
	Start time.Time `json:"start"`
}

// Key identifies a cell across files (for compare).
func (c *Cell) Key() string {
	return fmt.Sprintf("%s|%s|%s|%s", c.Mode, c.Path, c.Provider, c.Test)
}

// Values returns the values of valid samples.
func (c *Cell) Values() []float64 {
	var v []float64
	for _, s := range c.Samples {
		if s.Valid {
			v = append(v, s.Value)
		}
	}
	return v
}

// Write writes the file as indented JSON.
func Write(path string, f *File) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read loads and checks a results file.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: not a vnetlab results file: %w", path, err)
	}
	if f.SchemaVersion == 0 || f.SchemaVersion > SchemaVersion {
		return nil, fmt.Errorf("%s: schema_version %d is not supported (this vnetlab reads up to %d)", path, f.SchemaVersion, SchemaVersion)
	}
	return &f, nil
}

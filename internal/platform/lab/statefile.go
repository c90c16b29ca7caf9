package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// A lab's state directory holds, beside its state, the JSON files of what
// was added to it later (labservice's services.json, labpolicy's
// policies.json): each read and written here, and changed under the lab's
// lock (Open) by its package's Edit.

// ReadFile reads lab labName's JSON file file into v, leaving v as it is
// when the lab has no such file yet.
func ReadFile(labName, file string, v any) error {
	b, err := os.ReadFile(filepath.Join(Dir(labName), file))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("lab %s: corrupt %s (%v): fix or remove it", labName, file, err)
	}
	return nil
}

// WriteFile writes v as lab labName's JSON file file, atomically.
func WriteFile(labName, file string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(Dir(labName), file)
	if err := os.WriteFile(p+".tmp", append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

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

// ReadNew reads lab labName's JSON file file into a new T (T's zero value
// when the lab has no such file yet).
func ReadNew[T any](labName, file string) (*T, error) {
	v := new(T)
	if err := ReadFile(labName, file, v); err != nil {
		return nil, err
	}
	return v, nil
}

// WriteFile writes v as lab labName's JSON file file, atomically.
func WriteFile(labName, file string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteBytes(labName, file, append(b, '\n'))
}

// WriteBytes writes b as lab labName's file file, atomically.
func WriteBytes(labName, file string, b []byte) error {
	p := filepath.Join(Dir(labName), file)
	if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// EditFile is every change's transaction on such a file: under lab name's
// lock, load the file, keep a deep copy (the old side), let change edit it
// (its message is returned) and commit old → new (apply it to the lab, then
// save it). A change or commit that fails leaves the file as it was; it is
// the commit's to leave the lab as it was too.
func EditFile[F interface{ Clone() F }](name string, load func(labName string) (F, error),
	change func(st *State, f F) (string, error), commit func(st *State, old, f F) error) (*State, F, string, error) {
	var zero F
	l, err := Open(name)
	if err != nil {
		return nil, zero, "", err
	}
	defer l.Release()
	st := l.State
	f, err := load(st.Name)
	if err != nil {
		return nil, zero, "", err
	}
	old := f.Clone()
	msg, err := change(st, f)
	if err != nil {
		return nil, zero, "", err
	}
	if err := commit(st, old, f); err != nil {
		return nil, zero, "", err
	}
	return st, f, msg, nil
}

// Command verifier loads each of vnetlab's committed BPF objects into the
// kernel (maps unpinned, nothing attached) and prints, per program, the
// instructions the verifier processed and the program's size: the numbers
// to state before and after a change to bpf/. Needs root.
//
//	go run ./tools/verifier            every object
//	go run ./tools/verifier FILE.o ... some objects
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
)

// objects are the committed bpf2go objects (*_bpfel.o) below internal/.
func objects() ([]string, error) {
	var out []string
	err := filepath.WalkDir("internal", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, "_bpfel.o") {
			out = append(out, path)
		}
		return err
	})
	if err == nil && len(out) == 0 {
		err = errors.New("no *_bpfel.o below internal/: run it from the repository's root")
	}
	return out, err
}

// processed is the verifier's statistics line: "processed N insns (limit ...".
var processed = regexp.MustCompile(`processed (\d+) insns`)

func main() {
	files := os.Args[1:]
	if len(files) == 0 {
		var err error
		if files, err = objects(); err != nil {
			fmt.Fprintln(os.Stderr, "verifier:", err)
			os.Exit(1)
		}
	}
	failed := false
	fmt.Printf("%-16s %-28s %10s %8s\n", "object", "program", "verified", "insns")
	for _, f := range files {
		if err := report(f); err != nil {
			fmt.Fprintf(os.Stderr, "verifier: %s: %v\n", f, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func report(file string) error {
	spec, err := ebpf.LoadCollectionSpec(file)
	if err != nil {
		return err
	}
	for _, m := range spec.Maps {
		m.Pinning = ebpf.PinNone
	}
	names := make([]string, 0, len(spec.Programs))
	for n := range spec.Programs {
		names = append(names, n)
	}
	sort.Strings(names)
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats},
	})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("%+v", ve)
		}
		return err
	}
	defer coll.Close()
	obj := filepath.Base(file)
	for _, n := range names {
		p := coll.Programs[n]
		if p == nil {
			continue
		}
		m := processed.FindStringSubmatch(p.VerifierLog)
		v := "?"
		if m != nil {
			v = m[1]
		}
		fmt.Printf("%-16s %-28s %10s %8d\n", obj, n, v, len(spec.Programs[n].Instructions))
	}
	return nil
}

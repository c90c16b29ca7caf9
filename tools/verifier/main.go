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
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/cilium/ebpf"
)

// objects are the committed bpf2go objects, one per BPF source.
var objects = []string{
	"internal/datapath/tcbpf/service_bpfel.o",
	"internal/datapath/polbpf/policy_bpfel.o",
	"internal/datapath/sock/sock_bpfel.o",
	"internal/measure/pktstat/pktsize_bpfel.o",
	"internal/measure/profile/profile_bpfel.o",
}

// processed is the verifier's statistics line: "processed N insns (limit ...".
var processed = regexp.MustCompile(`processed (\d+) insns`)

func main() {
	files := os.Args[1:]
	if len(files) == 0 {
		files = objects
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

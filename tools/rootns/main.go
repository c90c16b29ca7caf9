// Command rootns saves a snapshot of the root network namespace and later
// compares against it: `make test` wraps the whole suite with it.
//
//	rootns save FILE      # before
//	rootns check FILE     # after: exit 1 and print the difference if anything changed
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/vnetlab/vnetlab/internal/system/rootns"
)

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "save" && os.Args[1] != "check") {
		fmt.Fprintln(os.Stderr, "usage: rootns save|check FILE")
		os.Exit(2)
	}
	file := os.Args[2]
	if os.Args[1] == "save" {
		b, _ := json.Marshal(rootns.Snapshot())
		if err := os.WriteFile(file, b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var before map[string]string
	if err := json.Unmarshal(b, &before); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if d := rootns.Diff(before, rootns.Snapshot()); d != "" {
		fmt.Printf("FAIL: the root namespace changed during the test suite:\n%s\n", d)
		os.Exit(1)
	}
	fmt.Println("root namespace unchanged: links, addresses, routes, rules, iptables, nftables, net.* sysctls, the sysctls kubelet sets")
}

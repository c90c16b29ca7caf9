package main

import (
	"os"
	"path/filepath"

	"github.com/vnetlab/vnetlab/internal/platform/cni"
)

// Invoked as vnetlab-cni (a link in a CNI bin directory, as `kube up --cni
// vnetlab` makes), the binary is vnetlab's CNI plugin: the container runtime
// runs it with CNI_* variables and a configuration on stdin, no arguments.
// Checked in init, before the CLI parses anything.
func init() {
	if filepath.Base(os.Args[0]) == cni.BinaryName {
		cni.Main()
		os.Exit(0)
	}
}

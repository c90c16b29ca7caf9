package binaries

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Cilium (its agent, generic operator, CNI plugin, debug CLI and health
// responder) comes from a pinned module of its own: cilium.mod and
// cilium.sum are its go.mod and go.sum, with the commands as the module's
// tools and Cilium's own replace directives repeated (a dependency's
// replaces do not apply), and cilium.sum begun from Cilium's go.sum (its
// fork of gobgp is in no checksum database). It builds as upstream builds
// it: without cgo, with the osusergo tag, and the operator's generic IPAM
// provider (ipam_provider_operator). The agent compiles its datapath from
// C at run time, so the module's bpf/ tree is kept beside the commands
// (CiliumLibDir). To move to another release: copy both files to an empty
// directory as go.mod and go.sum, put the release's go.sum into go.sum and
// its replace lines into go.mod, change the version, run `go mod tidy`,
// copy them back and change CiliumVersion. v1.19.0 is the newest release
// whose every module the Go module proxy serves here.
const CiliumVersion = "v1.19.0"

// File names of the Cilium build's outputs.
const (
	CiliumAgent          = "cilium-agent"
	CiliumOperator       = "cilium-operator-generic"
	CiliumCNI            = "cilium-cni"
	CiliumDbg            = "cilium-dbg"
	CiliumHealthResponse = "cilium-health-responder"
	// CiliumLibDir is the agent's --lib-dir, beside the commands: its bpf/
	// holds the datapath's C sources.
	CiliumLibDir = "lib"
)

var (
	//go:embed cilium.mod
	ciliumMod []byte
	//go:embed cilium.sum
	ciliumSum []byte
)

// CiliumBuild identifies the Cilium build (version and a hash of the
// module's files), the name of its cache directory.
func CiliumBuild() string { return buildID(CiliumVersion, ciliumMod, ciliumSum) }

const ciliumPkg = "github.com/cilium/cilium"

func cilium() (module, error) {
	root, err := cacheRoot()
	if err != nil {
		return module{}, err
	}
	return module{what: "Cilium " + CiliumVersion + " (" + strings.Join([]string{CiliumAgent, CiliumOperator, CiliumCNI, CiliumDbg, CiliumHealthResponse}, ", ") + ")",
		dir:   filepath.Join(root, "cilium", CiliumBuild()),
		files: map[string][]byte{"go.mod": ciliumMod, "go.sum": ciliumSum},
		pkgs: []string{ciliumPkg + "/daemon", ciliumPkg + "/operator", ciliumPkg + "/plugins/cilium-cni",
			ciliumPkg + "/cilium-dbg", ciliumPkg + "/cilium-health/responder"},
		names:      map[string]string{"daemon": CiliumAgent, "operator": CiliumOperator, "responder": CiliumHealthResponse},
		outputs:    []string{CiliumAgent, CiliumOperator, CiliumCNI, CiliumDbg, CiliumHealthResponse},
		tags:       "osusergo,ipam_provider_operator",
		ldflags:    "-s -w -X " + ciliumPkg + "/pkg/version.ciliumVersion=" + strings.TrimPrefix(CiliumVersion, "v"),
		after:      copyCiliumBPF,
		afterFiles: []string{filepath.Join(CiliumLibDir, "bpf", "bpf_lxc.c")},
		estimate:   "about 6 minutes on 2 idle cores with a cold Go build cache, and 2.5 GB of memory"}, nil
}

// copyCiliumBPF copies the module's bpf/ tree, the datapath's C sources the
// agent compiles at run time, into tmp's lib/bpf.
func copyCiliumBPF(ctx context.Context, goTool, src, tmp string) error {
	cmd := exec.CommandContext(ctx, goTool, "list", "-m", "-f", "{{.Dir}}", ciliumPkg)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("finding %s in the module cache: %w", ciliumPkg, err)
	}
	from := filepath.Join(strings.TrimSpace(string(out)), "bpf")
	// The module cache's files are read-only: the copy's are the owner's.
	return os.CopyFS(filepath.Join(tmp, CiliumLibDir, "bpf"), os.DirFS(from))
}

// EnsureCilium returns the directory holding Cilium's commands and its
// CiliumLibDir, building them first when they are not cached.
func EnsureCilium(ctx context.Context, say func(string, ...any)) (string, error) {
	m, err := cilium()
	if err != nil {
		return "", err
	}
	return m.ensure(ctx, say)
}

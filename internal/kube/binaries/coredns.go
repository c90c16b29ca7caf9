package binaries

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"path/filepath"
)

// CoreDNS, the cluster DNS of vnetlab's local clusters, comes from a pinned
// module of its own (its dependencies are not Kubernetes's): coredns.mod and
// coredns.sum are its go.mod and go.sum, coredns_main.go.txt its main.go (a
// .txt so that vnetlab's own build leaves it alone). CoreDNS's plugin list is
// generated code; the main imports only the plugins a cluster's DNS needs and
// sets their order itself. To move to another release: copy the three files
// to an empty directory as go.mod, go.sum and main.go, change the version,
// run `go mod tidy`, copy them back and change CoreDNSVersion.
const CoreDNSVersion = "v1.15.0"

// CoreDNS is the command's file name.
const CoreDNS = "coredns"

var (
	//go:embed coredns.mod
	corednsMod []byte
	//go:embed coredns.sum
	corednsSum []byte
	//go:embed coredns_main.go.txt
	corednsMain []byte
)

// CoreDNSBuild identifies the CoreDNS build: its version and a hash of the
// module's files, so that a changed plugin list is rebuilt rather than taken
// from the cache.
func CoreDNSBuild() string { return buildID(CoreDNSVersion, corednsMod, corednsSum, corednsMain) }

// buildID is a version and a hash of a pinned module's files: a cache
// directory name that changes when the files do.
func buildID(version string, files ...[]byte) string {
	h := sha256.New()
	for _, b := range files {
		h.Write(b)
	}
	return version + "-" + hex.EncodeToString(h.Sum(nil))[:8]
}

func coreDNS() (module, error) {
	root, err := cacheRoot()
	if err != nil {
		return module{}, err
	}
	return module{what: "CoreDNS " + CoreDNSVersion, dir: filepath.Join(root, CoreDNS, CoreDNSBuild()),
		files: map[string][]byte{"go.mod": corednsMod, "go.sum": corednsSum, "main.go": corednsMain},
		pkgs:  []string{"."}, outputs: []string{CoreDNS}, ldflags: "-s -w",
		estimate: "about 2 minutes on 2 cores"}, nil
}

// EnsureCoreDNS returns the path of the built coredns, building it first when
// it is not cached (about 2 minutes with a cold Go build cache). The cache
// directory (beside the binary) also keeps its image archive.
func EnsureCoreDNS(ctx context.Context, say func(string, ...any)) (string, error) {
	return ensureCommand(ctx, say, coreDNS, CoreDNS)
}

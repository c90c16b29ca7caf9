package binaries

import (
	"context"
	_ "embed"
	"path/filepath"
)

// kube-router's controller (kube up --network-policy kube-router) comes from
// a pinned module of its own: kuberouter.mod and kuberouter.sum are its
// go.mod and go.sum, with cmd/kube-router as the module's tool. Only its
// network policy controller runs (--run-firewall alone: internal/kube/cluster
// kuberouter.go). It builds as upstream builds it, without cgo. To move to
// another release: copy both files to an empty directory as go.mod and
// go.sum, change the version in `go get -tool
// github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@VERSION`, run
// `go mod tidy`, copy them back and change KubeRouterVersion. v2.1.0 is the
// release the Go module proxy serves as the network policy peer; security
// advisories are reported against it, which a local test cluster on this
// machine's namespaces does not expose.
const KubeRouterVersion = "v2.1.0"

// kubeRouterOutput is the file `go build` writes (the package's name).
const kubeRouterOutput = "kube-router"

var (
	//go:embed kuberouter.mod
	kubeRouterMod []byte
	//go:embed kuberouter.sum
	kubeRouterSum []byte
)

// KubeRouterBuild identifies the kube-router build (version and a hash of
// the module's files), the name of its cache directory.
func KubeRouterBuild() string { return buildID(KubeRouterVersion, kubeRouterMod, kubeRouterSum) }

const kubeRouterPkg = "github.com/cloudnativelabs/kube-router/v2"

func kubeRouter() (module, error) {
	root, err := cacheRoot()
	if err != nil {
		return module{}, err
	}
	return module{what: "kube-router " + KubeRouterVersion, dir: filepath.Join(root, "kube-router", KubeRouterBuild()),
		files: map[string][]byte{"go.mod": kubeRouterMod, "go.sum": kubeRouterSum},
		pkgs:  []string{kubeRouterPkg + "/cmd/kube-router"}, outputs: []string{kubeRouterOutput},
		ldflags:  "-s -w -X " + kubeRouterPkg + "/pkg/version.Version=" + KubeRouterVersion,
		estimate: "about 2 minutes on 2 cores"}, nil
}

// EnsureKubeRouter returns the path of the built kube-router, building it
// first when it is not cached. The cache directory (beside the binary) also
// keeps its image archive.
func EnsureKubeRouter(ctx context.Context, say func(string, ...any)) (string, error) {
	return ensureCommand(ctx, say, kubeRouter, kubeRouterOutput)
}

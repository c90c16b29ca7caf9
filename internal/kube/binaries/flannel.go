package binaries

import (
	"context"
	_ "embed"
	"path/filepath"
)

// flanneld, the daemon of flannel (kube up --cni flannel), comes from a pinned
// module of its own: flannel.mod and flannel.sum are its go.mod and go.sum,
// with flanneld as the module's tool. flanneld's main imports every backend,
// and its tencent-vpc backend imports a Tencent Cloud module the Go module
// proxy does not serve (403): the module replaces it with a local stand-in
// (flannel_vpcstub.mod and flannel_vpcstub.go.txt, the stand-in's go.mod and
// its one package) whose calls fail; vnetlab never selects that backend.
// flannel's udp backend is cgo on amd64, so flanneld is built as upstream
// builds it: cgo on, linked statically. To move to another release: copy the
// files to an empty directory (go.mod, go.sum, vpcstub/go.mod,
// vpcstub/v20170312/vpc.go), change the version in `go get -tool
// github.com/flannel-io/flannel@VERSION`, run `go mod tidy`, copy them back
// and change FlannelVersion.
const FlannelVersion = "v0.28.10"

// flannelOutput is the file `go build` writes: named after the package
// (upstream renames it flanneld; images put it at that name).
const flannelOutput = "flannel"

var (
	//go:embed flannel.mod
	flannelMod []byte
	//go:embed flannel.sum
	flannelSum []byte
	//go:embed flannel_vpcstub.mod
	flannelVPCStubMod []byte
	//go:embed flannel_vpcstub.go.txt
	flannelVPCStub []byte
)

// FlannelBuild identifies the flanneld build (version and a hash of the
// module's files), the name of its cache directory.
func FlannelBuild() string {
	return buildID(FlannelVersion, flannelMod, flannelSum, flannelVPCStubMod, flannelVPCStub)
}

const flannelPkg = "github.com/flannel-io/flannel"

func flannel() (module, error) {
	root, err := cacheRoot()
	if err != nil {
		return module{}, err
	}
	return module{what: "flanneld " + FlannelVersion, dir: filepath.Join(root, "flannel", FlannelBuild()),
		files: map[string][]byte{"go.mod": flannelMod, "go.sum": flannelSum,
			"vpcstub/go.mod": flannelVPCStubMod, "vpcstub/v20170312/vpc.go": flannelVPCStub},
		pkgs: []string{flannelPkg}, outputs: []string{flannelOutput}, cgo: true,
		ldflags:  "-s -w -X " + flannelPkg + "/pkg/version.Version=" + FlannelVersion + ` -extldflags "-static"`,
		estimate: "about 2 minutes on 2 cores"}, nil
}

// EnsureFlannel returns the path of the built flanneld, building it first
// when it is not cached. The cache directory (beside the binary) also keeps
// its image archive.
func EnsureFlannel(ctx context.Context, say func(string, ...any)) (string, error) {
	return ensureCommand(ctx, say, flannel, flannelOutput)
}

// Package binaries builds the Kubernetes commands a local cluster runs
// (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
// kube-proxy, kubectl) from a pinned Go module, once, and caches them by
// version: no container registry and no release download is needed, only the
// Go module proxy.
//
// pinned.mod and pinned.sum are that module's go.mod and go.sum (renamed so
// they stay inside vnetlab's module and can be embedded). k8s.io/kubernetes
// replaces its staging modules with local directories, so `go install` of its
// commands refuses; a module that requires it and replaces each staging
// module with its published v0.X.Y version builds them. To move to another
// release: copy both files to an empty directory as go.mod/go.sum, change the
// versions, add a file importing the six command packages, run `go mod tidy`,
// copy them back and change Version.
package binaries

import (
	"context"
	_ "embed"
	"errors"
	"path/filepath"
	"strings"
)

// Version is the Kubernetes release vnetlab's local clusters run.
const Version = "v1.37.2"

//go:embed pinned.mod
var pinnedMod []byte

//go:embed pinned.sum
var pinnedSum []byte

// Command names, each built from k8s.io/kubernetes/cmd/<name>.
const (
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kubelet           = "kubelet"
	KubeProxy         = "kube-proxy"
	Kubectl           = "kubectl"
)

// Commands are built together (one `go build`: shared packages compile once).
var Commands = []string{APIServer, ControllerManager, Scheduler, Kubelet, KubeProxy, Kubectl}

// CacheDir is where built releases are kept: ~/.cache/vnetlab/kube/<version>
// (or $VNETLAB_KUBE_CACHE/<version>).
func CacheDir() (string, error) {
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, Version), nil
}

func kubernetes() (module, error) {
	dir, err := CacheDir()
	if err != nil {
		return module{}, err
	}
	var pkgs []string
	for _, c := range Commands {
		pkgs = append(pkgs, "k8s.io/kubernetes/cmd/"+c)
	}
	return module{what: "Kubernetes " + Version + " (" + strings.Join(Commands, ", ") + ")", dir: dir,
		files: map[string][]byte{"go.mod": pinnedMod, "go.sum": pinnedSum}, pkgs: pkgs, outputs: Commands,
		ldflags: ldflags(), estimate: "about 10 minutes on 2 cores"}, nil
}

// Cached returns the directory holding every command, or "" when they are not
// all built yet.
func Cached() (string, error) {
	m, err := kubernetes()
	if err != nil {
		return "", err
	}
	return m.cached(), nil
}

// Ensure returns the directory of the built commands, building them first if
// they are not cached (about 10 minutes on 2 cores with a cold Go build cache,
// under a minute with a warm one).
func Ensure(ctx context.Context, say func(string, ...any)) (string, error) {
	m, err := kubernetes()
	if err != nil {
		return "", err
	}
	return m.ensure(ctx, say)
}

// ldflags stamps the release into the binaries (without it they report v0.0.0
// and kubelet's version skew checks misbehave).
func ldflags() string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(Version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	f := []string{"-s", "-w"}
	for _, p := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		f = append(f, "-X", p+".gitVersion="+Version, "-X", p+".gitMajor="+major, "-X", p+".gitMinor="+minor, "-X", p+".gitTreeState=clean")
	}
	return strings.Join(f, " ")
}

// ErrNotBuilt is returned by lookups that must not start a build.
var ErrNotBuilt = errors.New("the Kubernetes binaries are not built: run `vnetlab kube up` once")

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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
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
	if d := os.Getenv("VNETLAB_KUBE_CACHE"); d != "" {
		return filepath.Join(d, Version), nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the Kubernetes binaries (%v): set VNETLAB_KUBE_CACHE", err)
	}
	return filepath.Join(base, "vnetlab", "kube", Version), nil
}

// Cached returns the directory holding every command, or "" when they are not
// all built yet.
func Cached() (string, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bin")
	for _, c := range Commands {
		if fi, err := os.Stat(filepath.Join(bin, c)); err != nil || fi.Mode()&0o111 == 0 {
			return "", nil
		}
	}
	return bin, nil
}

// Ensure returns the directory of the built commands, building them first if
// they are not cached (about 10 minutes on 2 cores with a cold Go build cache,
// under a minute with a warm one).
func Ensure(ctx context.Context, say func(string, ...any)) (string, error) {
	if bin, err := Cached(); err != nil || bin != "" {
		return bin, err
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the Kubernetes %s binaries are not built yet and building them needs the Go toolchain (go 1.26+) in PATH: install Go, or run once as a user who has it", Version)
	}
	dir, _ := CacheDir()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), pinnedMod, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), pinnedSum, 0o644); err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, "bin.building")
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	args := []string{"build", "-trimpath", "-ldflags", ldflags(), "-o", tmp + "/"}
	for _, c := range Commands {
		args = append(args, "k8s.io/kubernetes/cmd/"+c)
	}
	say("building Kubernetes %s (%s) from the Go module proxy into %s: the first time takes about 10 minutes on 2 cores", Version, strings.Join(Commands, ", "), dir)
	start := time.Now()
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(tmp)
		msg := strings.TrimSpace(string(out))
		if len(msg) > 800 {
			msg = "..." + msg[len(msg)-800:]
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("building Kubernetes %s failed (%v): %s", Version, err, msg)
	}
	bin := filepath.Join(dir, "bin")
	_ = os.RemoveAll(bin)
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	say("built Kubernetes %s in %s", Version, time.Since(start).Round(time.Second))
	return bin, nil
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

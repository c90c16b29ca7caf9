package binaries

import (
	"context"
	_ "embed"
	"path/filepath"
)

// The upstream end-to-end tests of the same Kubernetes release come from a
// pinned module of their own: e2e.mod and e2e.sum are its go.mod and go.sum,
// e2e_deps.go.txt its one source file (a .txt so that vnetlab's own build
// leaves it alone). e2e.test is built from a test file, which no package
// imports, so the source file imports what that test file imports and `go mod
// tidy` records every module it needs; ginkgo's CLI and the test images'
// programs are the module's tool directives (their versions are the ones
// k8s.io/kubernetes's go.mod pins, so ginkgo's CLI matches e2e.test's
// library). To move to another release: copy the three files to an empty
// directory as go.mod, go.sum and deps.go, change the versions (and the
// imports, from test/e2e/e2e_test.go), run `go mod tidy` and copy them back.
var (
	//go:embed e2e.mod
	e2eMod []byte
	//go:embed e2e.sum
	e2eSum []byte
	//go:embed e2e_deps.go.txt
	e2eDeps []byte
)

// File names of the end-to-end build's outputs.
const (
	// E2ETest is upstream's e2e.test (k8s.io/kubernetes/test/e2e).
	E2ETest = "e2e.test"
	// Ginkgo is the ginkgo v2 CLI, which runs e2e.test in parallel.
	Ginkgo = "ginkgo"
	// Agnhost is the test images' Swiss army knife (test/images/agnhost).
	Agnhost = "agnhost"
	// Regression74839 is the program of the image of the Conntrack spec
	// "should not be vulnerable to the invalid conntrack state bug".
	Regression74839 = "regression-issue-74839"
)

func e2e() (module, error) {
	root, err := cacheRoot()
	if err != nil {
		return module{}, err
	}
	return module{what: "the end-to-end tests of Kubernetes " + Version + " (e2e.test, ginkgo, agnhost)",
		dir:   filepath.Join(root, "e2e", buildID(Version, e2eMod, e2eSum, e2eDeps)),
		files: map[string][]byte{"go.mod": e2eMod, "go.sum": e2eSum, "deps.go": e2eDeps},
		pkgs: []string{"github.com/onsi/ginkgo/v2/ginkgo", "k8s.io/kubernetes/test/images/agnhost",
			"k8s.io/kubernetes/test/images/regression-issue-74839"},
		tests:    map[string]string{E2ETest: "k8s.io/kubernetes/test/e2e"},
		outputs:  []string{E2ETest, Ginkgo, Agnhost, Regression74839},
		ldflags:  ldflags(),
		estimate: "about 10 minutes on 2 cores once Kubernetes itself is built"}, nil
}

// EnsureE2E returns the directory holding e2e.test, ginkgo, agnhost and
// regression-issue-74839, building them first when they are not cached.
func EnsureE2E(ctx context.Context, say func(string, ...any)) (string, error) {
	m, err := e2e()
	if err != nil {
		return "", err
	}
	return m.ensure(ctx, say)
}

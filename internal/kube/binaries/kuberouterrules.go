package binaries

import (
	"context"
	_ "embed"
	"path/filepath"
)

// kube-router's rules for a world (labpolicy.KubeRouterRules): a program
// that links kube-router's own NetworkPolicy controller
// (pkg/controllers/netpol, the release KubeRouterVersion names), runs one
// full sync of it on a world given as Kubernetes objects through a fake
// clientset, and leaves the iptables rules and ipsets in the network
// namespace it runs in. It is a pinned module of its own, as CoreDNS's is:
// kuberouterrules.mod and kuberouterrules.sum are its go.mod and go.sum,
// kuberouterrules_main.go.txt its main.go (a .txt so that vnetlab's own
// build leaves it alone; kube-router stays out of vnetlab's go.mod). To move
// to another release: copy the three files to an empty directory as go.mod,
// go.sum and main.go, change kube-router's version in go.mod to
// KubeRouterVersion's (kuberouter.mod's), run `go mod tidy` and copy them
// back.
const KubeRouterRules = "kube-router-rules"

var (
	//go:embed kuberouterrules.mod
	kubeRouterRulesMod []byte
	//go:embed kuberouterrules.sum
	kubeRouterRulesSum []byte
	//go:embed kuberouterrules_main.go.txt
	kubeRouterRulesMain []byte
)

// KubeRouterRulesBuild identifies the program's build (kube-router's
// version and a hash of the module's files), the name of its cache
// directory.
func KubeRouterRulesBuild() string {
	return buildID(KubeRouterVersion, kubeRouterRulesMod, kubeRouterRulesSum, kubeRouterRulesMain)
}

func kubeRouterRules() (module, error) {
	root, err := cacheRoot()
	if err != nil {
		return module{}, err
	}
	return module{what: "kube-router " + KubeRouterVersion + "'s rules program (" + KubeRouterRules + ")",
		dir:   filepath.Join(root, KubeRouterRules, KubeRouterRulesBuild()),
		files: map[string][]byte{"go.mod": kubeRouterRulesMod, "go.sum": kubeRouterRulesSum, "main.go": kubeRouterRulesMain},
		pkgs:  []string{"."}, outputs: []string{KubeRouterRules}, ldflags: "-s -w",
		estimate: "about a minute on 2 cores, more with a cold Go build cache"}, nil
}

// EnsureKubeRouterRules returns the path of the built kube-router-rules,
// building it first when it is not cached.
func EnsureKubeRouterRules(ctx context.Context, say func(string, ...any)) (string, error) {
	return ensureCommand(ctx, say, kubeRouterRules, KubeRouterRules)
}

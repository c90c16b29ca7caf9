package binaries

import (
	"context"
	"strings"
)

// A Build is one pinned module whose commands a local cluster, a peer or
// a test needs, by the name `vnetlab kube build` takes.
type Build struct {
	Name string
	// For says who needs it, for --help.
	For string
	// Ensure builds it unless it is cached, and returns the path of a
	// command, or of the directory of its commands.
	Ensure func(ctx context.Context, say func(string, ...any)) (string, error)
	// OnRequest: built only when named (kube build --only) or with every
	// other (--all, as make test asks), for it is long to build and no
	// default cluster runs it.
	OnRequest bool
}

// Builds are every pinned build, in the order `make test` first needs
// them: a build ahead of time (kube build) finds each one's cache
// filled before its first test asks for it.
var Builds = []Build{
	{Name: "kubernetes", For: "kube up: " + strings.Join(Commands, ", "), Ensure: Ensure},
	{Name: "coredns", For: "kube up: cluster DNS", Ensure: EnsureCoreDNS},
	{Name: "flannel", For: "kube up --cni flannel", Ensure: EnsureFlannel},
	{Name: "kube-router", For: "kube up --network-policy kube-router", Ensure: EnsureKubeRouter},
	{Name: "e2e", For: "kube conformance: e2e.test, ginkgo, agnhost", Ensure: EnsureE2E},
	{Name: "kube-router-rules", For: "the lab's kube-router NetworkPolicy provider", Ensure: EnsureKubeRouterRules},
	{Name: "cilium", For: "Cilium's agent, generic operator, CNI plugin, cilium-dbg and health responder, with its datapath's C sources (only when named, or with --all)",
		Ensure: EnsureCilium, OnRequest: true},
}

// BuildNames are the Builds' names.
func BuildNames() []string {
	var out []string
	for _, b := range Builds {
		out = append(out, b.Name)
	}
	return out
}

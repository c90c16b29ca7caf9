package conformance

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/vnetlab/vnetlab/internal/kube/binaries"
	"github.com/vnetlab/vnetlab/internal/kube/image"
)

// The specs' pods run upstream's test images under their upstream names
// (test/utils/image/manifest.go), with imagePullPolicy IfNotPresent: images
// built here and imported into every node are never pulled. Each image is
// made from programs built from the pinned module and Debian's, with the
// shared libraries they load; e2e.test --list-images names the tags.

// Repositories (without registry and tag) of the images built here.
const (
	agnhostRepo    = "e2e-test-images/agnhost"
	busyboxRepo    = "e2e-test-images/busybox"
	pauseRepo      = "pause"
	regressionRepo = "e2e-test-images/regression-issue-74839"
	// glibcDNSRepo is the DNS specs' querier, named GlibcDnsTesting in
	// v1.37.2's manifest (formerly jessie-dnsutils).
	glibcDNSRepo = "e2e-test-images/glibc-dns-testing"
	// distrolessIptablesRepo is the host-network privileged pod's image of
	// `KubeProxy should set TCP CLOSE_WAIT timeout` (its registry is
	// registry.k8s.io/build-image).
	distrolessIptablesRepo = "build-image/distroless-iptables"
)

// hostTools are the Debian programs agnhost's image holds besides agnhost
// and the DNS query tools (upstream's is Alpine with these packages), by
// their name in the image.
// The specs' jig runs them through a shell in the pods: `nc -v` (netcat-
// openbsd's; busybox's has no -v), curl and wget, ss. The shell is dash:
// busybox's ash would run its own nc and wget applets before $PATH's (and
// its static wget crashes beside a shared glibc).
var hostTools = []tool{
	{"sh", "dash", "dash"},
	{"nc", "nc.openbsd", "netcat-openbsd"},
	{"curl", "curl", "curl"},
	{"wget", "wget", "wget"},
	{"ss", "ss", "iproute2"},
	{"ip", "ip", "iproute2"},
}

// tool is a Debian program of an image: its name in the image, the
// program's, its package.
type tool struct{ name, program, pkg string }

// dnsQueryTools are what the DNS specs' probes run in both their queriers,
// agnhost's (upstream's: Alpine, musl) and glibc-dns-testing's (upstream's:
// Debian): `dig +notcp|+tcp ... && test -n ... && echo OK > /results/...`
// and `getent hosts NAME` in a shell loop; host and nslookup come with dig.
// Here both images hold Debian's, so both query through glibc.
var dnsQueryTools = []tool{
	{"dig", "dig", "bind9-dnsutils"},
	{"nslookup", "nslookup", "bind9-dnsutils"},
	{"host", "host", "bind9-host"},
	{"getent", "getent", "libc-bin"},
}

// dnsTools are the glibc querier's programs: a shell, the query tools and
// hostname as the pods' own.
var dnsTools = append([]tool{{"sh", "dash", "dash"}, {"hostname", "hostname", "hostname"}}, dnsQueryTools...)

// conntrackTools are what the CLOSE_WAIT spec runs in its host-network pod
// (test/e2e/network/kube_proxy.go), besides busybox's sleep (the pod's
// command), cat, grep and which: `/bin/sh -x -c 'test -f
// /proc/net/nf_conntrack'`, then `cat /proc/net/nf_conntrack | grep ...`,
// or, without that file, `which conntrack` and `conntrack -L -f ...`.
var conntrackTools = []tool{
	{"sh", "dash", "dash"},
	{"conntrack", "conntrack", "conntrack"},
}

// busybox gives every other command the specs' shell lines use (seq, sleep,
// dd, cat, timeout, ...), as upstream's Alpine and busybox images do.
const busyboxPkg = "busybox-static"

// testImage is one image to build and the references it carries.
type testImage struct {
	repo string
	refs []string
}

// imageInputs are the files made for the images: the directory of the
// end-to-end build's programs, CoreDNS (the cluster's DNS server's build),
// and porter's TLS pair (tlscert.go).
type imageInputs struct {
	e2eBin, coreDNS string
	tlsCert, tlsKey string
}

// builders make each repository's image from the built programs, with the
// given references.
var builders = map[string]func(in imageInputs, refs []string) (*image.Image, error){
	agnhostRepo:    agnhostImage,
	busyboxRepo:    busyboxImage,
	pauseRepo:      pauseImage,
	regressionRepo: regressionImage,
	glibcDNSRepo:   glibcDNSImage,
	// Upstream's image is kube-proxy's base (iptables, ipset, conntrack
	// on a distroless Debian); the one spec that runs it reads the node's
	// conntrack table through a shell (conntrackTools).
	distrolessIptablesRepo: distrolessIptablesImage,
}

// testImages picks, from e2e.test --list-images output, the images built
// here, grouped by repository (agnhost's current and previous tags are one
// image).
func testImages(list string) ([]testImage, error) {
	byRepo := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" {
			continue
		}
		ref, err := name.ParseReference(l)
		if err != nil {
			return nil, fmt.Errorf("e2e.test --list-images printed %q, not an image reference", l)
		}
		repo := ref.Context().RepositoryStr()
		if _, ok := builders[repo]; ok && !slices.Contains(byRepo[repo], l) {
			byRepo[repo] = append(byRepo[repo], l)
		}
	}
	var out []testImage
	for repo, refs := range byRepo {
		sort.Strings(refs)
		out = append(out, testImage{repo: repo, refs: refs})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].repo < out[j].repo })
	for _, repo := range []string{agnhostRepo, busyboxRepo, pauseRepo} {
		if _, ok := byRepo[repo]; !ok {
			return nil, fmt.Errorf("e2e.test --list-images names no %s image: is it Kubernetes %s's e2e.test?", repo, binaries.Version)
		}
	}
	return out, nil
}

// assemble makes the image of c with its references: the first, and the
// others as aliases.
func assemble(c image.Content, refs []string) (*image.Image, error) {
	im, _, err := image.Assemble(c)
	if err != nil {
		return nil, err
	}
	im.Ref, im.Aliases = refs[0], refs[1:]
	return im, nil
}

// busyboxLinks adds a link to busybox for each of its applets not already a
// file of the image.
func busyboxLinks(c *image.Content, dir string) error {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return fmt.Errorf("the test images need busybox (Debian package %s): run scripts/install-deps.sh", busyboxPkg)
	}
	c.Files[dir+"/busybox"] = bb
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %v", err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if _, ok := c.Files[dir+"/"+applet]; !ok && applet != "busybox" {
			c.Links[dir+"/"+applet] = "busybox"
		}
	}
	return nil
}

// agnhostImage: /agnhost as the entrypoint (pause by default, as upstream's),
// /coredns as upstream's (the DNS specs' own DNS server pods run it),
// porter's TLS pair in its working directory (/), the host tools with their
// libraries, busybox for the rest; /bin is /usr/bin as on Debian.
func agnhostImage(in imageInputs, refs []string) (*image.Image, error) {
	c := image.Content{Files: map[string]string{"/agnhost": filepath.Join(in.e2eBin, binaries.Agnhost), "/coredns": in.coreDNS,
		"/" + porterCert: in.tlsCert, "/" + porterKey: in.tlsKey},
		Links: map[string]string{"/bin": "usr/bin"}, Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}}
	if err := addTools(&c, "agnhost", append(slices.Clone(hostTools), dnsQueryTools...)); err != nil {
		return nil, err
	}
	if err := busyboxLinks(&c, "/usr/bin"); err != nil {
		return nil, err
	}
	return assemble(c, refs)
}

// addTools puts the tools in /usr/bin with their shared libraries.
func addTools(c *image.Content, what string, tools []tool) error {
	var progs []string
	for _, t := range tools {
		p, err := exec.LookPath(t.program)
		if err != nil {
			return fmt.Errorf("the %s test image needs %s (Debian package %s): run scripts/install-deps.sh", what, t.program, t.pkg)
		}
		c.Files["/usr/bin/"+t.name] = p
		progs = append(progs, "/usr/bin/"+t.name)
	}
	c.AddLibraries(progs...)
	return nil
}

// glibcDNSImage: the DNS tools on glibc with their libraries, busybox for
// the rest of the probes' shell lines (seq, sleep), sh by default.
func glibcDNSImage(_ imageInputs, refs []string) (*image.Image, error) {
	return toolsImage("glibc-dns-testing", dnsTools, refs)
}

// distrolessIptablesImage: a shell and conntrack with their libraries,
// busybox for the rest (sleep, cat, grep, which), sh by default.
func distrolessIptablesImage(_ imageInputs, refs []string) (*image.Image, error) {
	return toolsImage("distroless-iptables", conntrackTools, refs)
}

// toolsImage is an image of Debian tools with their libraries in /usr/bin,
// busybox's applets for every other command, /bin as /usr/bin, sh by
// default.
func toolsImage(what string, tools []tool, refs []string) (*image.Image, error) {
	c := image.Content{Files: map[string]string{}, Links: map[string]string{"/bin": "usr/bin"}, Cmd: []string{"sh"}}
	if err := addTools(&c, what, tools); err != nil {
		return nil, err
	}
	if err := busyboxLinks(&c, "/usr/bin"); err != nil {
		return nil, err
	}
	return assemble(c, refs)
}

// busyboxImage: busybox and its applets, sh by default.
func busyboxImage(_ imageInputs, refs []string) (*image.Image, error) {
	return toolsImage("busybox", nil, refs)
}

// pauseImage: agnhost's pause, which waits for SIGTERM as upstream's pause
// does.
func pauseImage(in imageInputs, refs []string) (*image.Image, error) {
	return assemble(image.Content{Files: map[string]string{"/agnhost": filepath.Join(in.e2eBin, binaries.Agnhost)},
		Entrypoint: []string{"/agnhost", "pause"}}, refs)
}

// regressionImage: the one static program.
func regressionImage(in imageInputs, refs []string) (*image.Image, error) {
	path := "/" + binaries.Regression74839
	return assemble(image.Content{Files: map[string]string{path: filepath.Join(in.e2eBin, binaries.Regression74839)}, Entrypoint: []string{path}}, refs)
}

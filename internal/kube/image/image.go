// Package image builds vnetlab's container image without a registry or a
// container tool: vnetlab itself, iperf3 and sockperf with the shared
// libraries ldd lists, as one layer (go-containerregistry writes the docker
// tarball that `ctr images import` and `kube load` take). The image's
// entrypoint is `vnetlab kube pause`, so the same image serves as the pod
// sandbox (pause) image of vnetlab's local clusters and as the measuring
// pods' image.
package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Repository is the name every vnetlab image carries; the tag is a hash of
// its content, so a rebuilt vnetlab gets a new tag.
const Repository = "vnetlab.local/vnetlab"

// VnetlabPath is where the image holds vnetlab (whatever its name here).
const VnetlabPath = "/usr/bin/vnetlab"

// Entrypoint makes a container idle until stopped (and reap children as PID 1).
var Entrypoint = []string{VnetlabPath, "kube", "pause"}

// Programs besides vnetlab that go into the image (the engines' tools).
var Programs = []string{"iperf3", "sockperf"}

// Image is a built image and its reference.
type Image struct {
	Ref string
	// Aliases are further references to the same image (Write tags it
	// with each).
	Aliases []string
	Image   v1.Image
}

// Content is what a one-layer image holds.
type Content struct {
	// Files: path in the image -> file on this machine (symlinks followed:
	// the image holds the content at the path the program asks for).
	Files map[string]string
	// Links: path in the image -> symlink target.
	Links           map[string]string
	Entrypoint, Cmd []string
}

// AddLibraries adds the shared libraries of the given files (paths in the
// image) as ldd lists them, each at its own path.
func (c *Content) AddLibraries(programs ...string) {
	for _, p := range programs {
		out, err := exec.Command("ldd", c.Files[p]).Output()
		if err != nil {
			continue // a static program: ldd says "not a dynamic executable" and fails
		}
		for _, lib := range ParseLdd(string(out)) {
			c.Files[lib] = lib
		}
	}
}

// Build collects the files and makes the image; self is the vnetlab
// executable to put in it.
func Build(self string) (*Image, error) {
	c := Content{Files: map[string]string{VnetlabPath: self}, Entrypoint: Entrypoint}
	progs := []string{VnetlabPath}
	for _, p := range Programs {
		path, err := exec.LookPath(p)
		if err != nil {
			return nil, fmt.Errorf("the image needs %s and it is not installed: run scripts/install-deps.sh", p)
		}
		c.Files["/usr/bin/"+p] = path
		progs = append(progs, "/usr/bin/"+p)
	}
	c.AddLibraries(progs...)
	im, sum, err := Assemble(c)
	if err != nil {
		return nil, err
	}
	im.Ref = Repository + ":" + sum[:12]
	return im, nil
}

// Program builds an image of one static program: file (on this machine) at
// path in the image, run as the entrypoint; ref names it.
func Program(ref, file, path string) (*Image, error) {
	im, _, err := Assemble(Content{Files: map[string]string{path: file}, Entrypoint: []string{path}})
	if err != nil {
		return nil, err
	}
	im.Ref = ref
	return im, nil
}

// Assemble makes a one-layer image of c and returns it, without a
// reference yet, with a hash of the layer's content.
func Assemble(c Content) (*Image, string, error) {
	layer, sum, err := tarLayer(c)
	if err != nil {
		return nil, "", err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer)), nil })
	if err != nil {
		return nil, "", err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, "", err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, "", err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = "amd64", "linux"
	cfg.Config.Entrypoint, cfg.Config.Cmd = c.Entrypoint, c.Cmd
	cfg.Config.Env = []string{"PATH=/usr/bin:/bin"}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, "", err
	}
	return &Image{Image: img}, sum, nil
}

// Write writes the image as a docker tarball (what `ctr images import`
// reads), tagged with its reference and its aliases.
func (im *Image) Write(path string) error {
	refs := map[name.Reference]v1.Image{}
	for _, r := range append([]string{im.Ref}, im.Aliases...) {
		tag, err := name.NewTag(r)
		if err != nil {
			return err
		}
		refs[tag] = im.Image
	}
	tmp := path + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write image %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// ParseLdd returns the absolute library paths in ldd's output (the loader
// included, the vDSO left out).
func ParseLdd(out string) []string {
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		}
	}
	return libs
}

// tarLayer writes c's files (symlinks followed) and links into an
// uncompressed tar, with the directories they need, and returns it with a
// hash of its content.
func tarLayer(c Content) ([]byte, string, error) {
	var paths []string
	for p := range c.Files {
		paths = append(paths, p)
	}
	for p := range c.Links {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// iperf3 keeps each stream's buffer in a file under /tmp.
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}); err != nil {
		return nil, "", err
	}
	dirs := map[string]bool{}
	h := sha256.New()
	for _, p := range paths {
		var parents []string
		for d := filepath.Dir(p); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
			dirs[d] = true
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755}); err != nil {
				return nil, "", err
			}
		}
		name := strings.TrimPrefix(p, "/")
		if target, ok := c.Links[p]; ok {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777}); err != nil {
				return nil, "", err
			}
			fmt.Fprintf(h, "%s\x00->%s\x00", p, target)
			continue
		}
		b, err := os.ReadFile(c.Files[p])
		if err != nil {
			return nil, "", err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(b))}); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), hex.EncodeToString(h.Sum(nil)), nil
}

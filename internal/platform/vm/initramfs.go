package vm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cavaliergopher/cpio"
)

// Initramfs is an initramfs being assembled: files copied from this machine
// at the same paths (so programs find their libraries and each other as they
// do here), symlinks, and generated files. Write emits it as cpio newc.
type Initramfs struct {
	entries map[string]entry // path without leading slash -> entry
}

type entry struct {
	src     string // file on this machine to copy
	data    []byte // generated content (when src is empty)
	link    string // symlink target
	dir     bool
	mode    os.FileMode
	symlink bool
}

// NewInitramfs starts an image laid out like a merged-/usr Debian: /bin,
// /sbin, /lib and /lib64 are links into /usr.
func NewInitramfs() *Initramfs {
	r := &Initramfs{entries: map[string]entry{}}
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		r.Symlink("/"+d, "usr/"+d)
		r.Dir("/usr/" + d)
	}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "var", "etc", "root"} {
		r.Dir("/" + d)
	}
	r.Symlink("/var/run", "../run")
	return r
}

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

// Dir adds a directory.
func (r *Initramfs) Dir(p string) {
	r.entries[clean(p)] = entry{dir: true, mode: 0o755}
}

// Symlink adds a symbolic link at p pointing to target.
func (r *Initramfs) Symlink(p, target string) {
	r.entries[clean(p)] = entry{symlink: true, link: target}
}

// Data adds a generated file.
func (r *Initramfs) Data(p string, data []byte, mode os.FileMode) {
	r.entries[clean(p)] = entry{data: data, mode: mode}
}

// File copies the file src of this machine to p in the image.
func (r *Initramfs) File(p, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	r.entries[clean(p)] = entry{src: src, mode: fi.Mode().Perm()}
	return nil
}

// Has says whether the image has something at p.
func (r *Initramfs) Has(p string) bool { _, ok := r.entries[clean(p)]; return ok }

// canonical is where a path of this machine really lives, its directories'
// symlinks resolved (/lib/x86_64-linux-gnu/libc.so.6 -> /usr/lib/...), the
// last element kept.
func canonical(p string) string {
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, filepath.Base(p))
}

// Program adds a program of this machine and the libraries it loads. When
// the path is a symlink (alternatives, multi-call programs like
// xtables-nft-multi or kmod), the image gets a link straight to the real
// file, so the program still sees the name it was called by.
func (r *Initramfs) Program(p string) error {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("program %s: %w", p, err)
	}
	if c := canonical(p); c != real {
		r.Symlink(c, real)
	}
	return r.Library(real)
}

// Library adds a file of this machine with the shared libraries `ldd` says it
// needs (none for static files), the dynamic loader included.
func (r *Initramfs) Library(p string) error {
	if err := r.File(canonical(p), p); err != nil {
		return err
	}
	out, err := exec.Command("ldd", p).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "not a dynamic executable") {
		return fmt.Errorf("ldd %s: %v: %s", p, err, out)
	}
	for _, lib := range ParseLdd(string(out)) {
		if r.Has(canonical(lib)) {
			continue
		}
		if err := r.File(canonical(lib), lib); err != nil {
			return fmt.Errorf("%s needs %s: %w", p, lib, err)
		}
	}
	return nil
}

// ParseLdd returns the library paths in ldd's output: "name => /path (addr)"
// and the loader's "/path (addr)"; the vDSO and unresolved names have none.
func ParseLdd(out string) []string {
	var libs []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if _, after, ok := strings.Cut(line, "=> "); ok {
			line = after
		}
		f := strings.Fields(line)
		if len(f) > 0 && strings.HasPrefix(f[0], "/") {
			libs = append(libs, f[0])
		}
	}
	return libs
}

// Tree adds every file under dir of this machine at the same paths.
func (r *Initramfs) Tree(dir string) error {
	return filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			r.Dir(canonical(p))
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			r.Symlink(canonical(p), t)
		case fi.Mode().IsRegular():
			return r.File(canonical(p), p)
		}
		return nil
	})
}

// Modules adds the kernel's modules in want (names or path prefixes, see
// Closure) with everything they need, and the tree's indexes, under
// /lib/modules/RELEASE. It returns the module files added.
func (r *Initramfs) Modules(k *Kernel, want []string) ([]string, error) {
	dep, err := os.ReadFile(filepath.Join(k.ModuleDir(), "modules.dep"))
	if err != nil {
		return nil, fmt.Errorf("%s has no module index (depmod): %w", k.Root, err)
	}
	soft, _ := os.ReadFile(filepath.Join(k.ModuleDir(), "modules.softdep"))
	files := ParseModuleDeps(string(dep), string(soft)).Closure(want)
	dst := "/usr/lib/modules/" + k.Release
	for _, f := range files {
		if err := r.File(dst+"/"+f, filepath.Join(k.ModuleDir(), f)); err != nil {
			return nil, err
		}
	}
	idx, err := filepath.Glob(filepath.Join(k.ModuleDir(), "modules.*"))
	if err != nil {
		return nil, err
	}
	for _, f := range idx {
		if err := r.File(dst+"/"+filepath.Base(f), f); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// Write emits the image as a cpio newc archive, parents before children.
func (r *Initramfs) Write(w io.Writer) error {
	// Every parent directory exists, even if not added.
	for p := range r.entries {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := r.entries[d]; !ok {
				r.entries[d] = entry{dir: true, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(r.entries))
	for p := range r.entries {
		names = append(names, p)
	}
	sort.Strings(names)
	bw := bufio.NewWriterSize(w, 1<<20)
	cw := cpio.NewWriter(bw)
	now := time.Now()
	for _, p := range names {
		e := r.entries[p]
		h := &cpio.Header{Name: p, ModTime: now}
		switch {
		case e.dir:
			h.Mode = cpio.TypeDir | cpio.FileMode(e.mode)
		case e.symlink:
			h.Mode = cpio.TypeSymlink | 0o777
			h.Linkname = e.link
			h.Size = int64(len(e.link))
		default:
			h.Mode = cpio.TypeReg | cpio.FileMode(e.mode)
		}
		if err := r.writeEntry(cw, h, e); err != nil {
			return fmt.Errorf("initramfs %s: %w", p, err)
		}
	}
	if err := cw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func (r *Initramfs) writeEntry(cw *cpio.Writer, h *cpio.Header, e entry) error {
	switch {
	case e.symlink:
		if err := cw.WriteHeader(h); err != nil {
			return err
		}
		_, err := cw.Write([]byte(e.link))
		return err
	case e.dir:
		return cw.WriteHeader(h)
	case e.src == "":
		h.Size = int64(len(e.data))
		if err := cw.WriteHeader(h); err != nil {
			return err
		}
		_, err := cw.Write(e.data)
		return err
	}
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = fi.Size()
	if err := cw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(cw, f)
	return err
}

package vm

import (
	"path"
	"sort"
	"strings"
)

// ModuleDeps is a module tree's index: each module's file (relative to
// lib/modules/RELEASE) and what it needs loaded first, hard (modules.dep) and
// soft (modules.softdep: libcrc32c needs crc32c, or openvswitch and nf_conntrack
// fail with "unknown symbol").
type ModuleDeps struct {
	File map[string]string   // module name -> relative path
	Deps map[string][]string // module name -> module names
}

// ModuleName is a module's name from its file name (dashes read as underscores).
func ModuleName(file string) string {
	b := path.Base(file)
	b = strings.TrimSuffix(strings.TrimSuffix(b, ".xz"), ".ko")
	return strings.ReplaceAll(b, "-", "_")
}

// ParseModuleDeps reads modules.dep and modules.softdep texts.
func ParseModuleDeps(dep, softdep string) ModuleDeps {
	m := ModuleDeps{File: map[string]string{}, Deps: map[string][]string{}}
	for _, line := range strings.Split(dep, "\n") {
		file, deps, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		name := ModuleName(file)
		m.File[name] = strings.TrimSpace(file)
		for _, d := range strings.Fields(deps) {
			m.Deps[name] = append(m.Deps[name], ModuleName(d))
		}
	}
	// softdep MODULE pre: A B post: C
	for _, line := range strings.Split(softdep, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "softdep" {
			continue
		}
		name := ModuleName(f[1])
		for _, d := range f[2:] {
			if d != "pre:" && d != "post:" {
				m.Deps[name] = append(m.Deps[name], ModuleName(d))
			}
		}
	}
	return m
}

// Closure returns the files of the wanted modules and of everything they
// need, sorted. want holds module names or path prefixes (e.g.
// "kernel/net/netfilter/": every module under it). Names the tree does not
// have are ignored (a kernel with a feature built in has no module for it).
func (m ModuleDeps) Closure(want []string) []string {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if seen[name] {
			return
		}
		if _, ok := m.File[name]; !ok {
			return
		}
		seen[name] = true
		for _, d := range m.Deps[name] {
			visit(d)
		}
	}
	for _, w := range want {
		if strings.HasSuffix(w, "/") {
			for name, file := range m.File {
				if strings.HasPrefix(file, w) {
					visit(name)
				}
			}
			continue
		}
		visit(ModuleName(w))
	}
	var files []string
	for name := range seen {
		files = append(files, m.File[name])
	}
	sort.Strings(files)
	return files
}

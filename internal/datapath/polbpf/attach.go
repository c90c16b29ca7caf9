package polbpf

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
	"github.com/vnetlab/vnetlab/internal/system/tcx"
)

// LinksDir holds, under a plane's directory, one directory per interface
// carrying the programs: its two tcx links, pinned.
const LinksDir = "links"

// Interface is a pod's interface: a namespace (a name under /run/netns, or
// a path) and an interface name in it.
type Interface struct {
	NS     string
	Ifname string
}

func (i Interface) String() string { return i.Ifname + " in " + i.NS }

func (p *Plane) linkDir(i Interface) string {
	return filepath.Join(p.dir, LinksDir, pinName(i.NS)+"@"+pinName(i.Ifname))
}

// pinName escapes s for a name in bpffs, which refuses a name with a dot
// (a pod's namespace under containerd's io.containerd.grpc.v1.cri/netns):
// Pinned reads it back with url.QueryUnescape.
func pinName(s string) string { return strings.ReplaceAll(url.QueryEscape(s), ".", "%2E") }

// The links' pin names: which program, at which side of the interface.
var hooks = []struct {
	name string
	at   ebpf.AttachType
}{{"egress", ebpf.AttachTCXEgress}, {"ingress", ebpf.AttachTCXIngress}}

// Attach puts pol_egress and pol_ingress on the pod's interface (tcx, after
// any program already there), pinned: they stay until Detach or Remove. An
// interface carries them once; attaching it again is a no-op.
func (p *Plane) Attach(i Interface) error {
	if p.Has(i) {
		return nil
	}
	dir := p.linkDir(i)
	progs, err := p.programs()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := attachHooks(i, dir, progs); err != nil {
		return errors.Join(err, detachDir(dir))
	}
	return nil
}

// attachHooks attaches each hook's program to i's interface, its link
// pinned in dir.
func attachHooks(i Interface, dir string, progs *policyPrograms) error {
	var ifindex int
	if err := nsutil.Do(i.NS, func() error {
		l, err := netlink.LinkByName(i.Ifname)
		if err != nil {
			return fmt.Errorf("no interface %s: %w", i, err)
		}
		ifindex = l.Attrs().Index
		return nil
	}); err != nil {
		return err
	}
	for _, h := range hooks {
		prog := progs.PolEgress
		if h.at == ebpf.AttachTCXIngress {
			prog = progs.PolIngress
		}
		err := tcx.Attach(i.NS, ifindex, prog, h.at, filepath.Join(dir, h.name))
		if errors.Is(err, ebpf.ErrNotSupported) {
			return fmt.Errorf("attach the policy programs to %s: this kernel has no tcx (Linux 6.6)", i)
		}
		if err != nil {
			return fmt.Errorf("attach pol_%s to %s: %w", h.name, i, err)
		}
	}
	return nil
}

// Has says whether the interface carries the programs (a link of this
// plane's is pinned for it).
func (p *Plane) Has(i Interface) bool {
	_, err := os.Stat(p.linkDir(i))
	return err == nil
}

// Detach removes the programs from the interface (nothing when it has none).
func (p *Plane) Detach(i Interface) error { return detachDir(p.linkDir(i)) }

// detachDir detaches an interface's links explicitly (a dropped pin alone
// detaches only when bpffs frees it, an RCU grace period later) and removes
// its directory.
func detachDir(dir string) error {
	var errs []error
	for _, h := range hooks {
		errs = append(errs, tcx.Detach(filepath.Join(dir, h.name)))
	}
	errs = append(errs, os.RemoveAll(dir))
	return errors.Join(errs...)
}

// detachAll detaches every interface of a plane's directory.
func detachAll(dir string) error {
	names, err := tcx.Dir(filepath.Join(dir, LinksDir))
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		errs = append(errs, detachDir(filepath.Join(dir, LinksDir, name)))
	}
	return errors.Join(errs...)
}

// Attached lists the interfaces carrying the programs whose links still
// hold an interface (0 once it is gone).
func (p *Plane) Attached() ([]Interface, error) {
	all, err := p.Pinned()
	var out []Interface
	for _, i := range all {
		if tcx.Linked(filepath.Join(p.linkDir(i), "ingress")) {
			out = append(out, i)
		}
	}
	return out, err
}

// Pinned lists every interface with links pinned in the plane, also those
// whose interface has gone with its namespace (Detach removes their pins).
func (p *Plane) Pinned() ([]Interface, error) {
	names, err := tcx.Dir(filepath.Join(p.dir, LinksDir))
	if err != nil {
		return nil, err
	}
	var out []Interface
	for _, name := range names {
		ns, ifname, ok := strings.Cut(name, "@")
		if !ok {
			continue
		}
		i := Interface{}
		if i.NS, err = url.QueryUnescape(ns); err != nil {
			continue
		}
		if i.Ifname, err = url.QueryUnescape(ifname); err != nil {
			continue
		}
		out = append(out, i)
	}
	return out, nil
}

// Programs names the tcx programs on the interface, egress then ingress
// (what a test or a check reads back from the kernel, whoever attached them);
// NS "" is the caller's namespace.
func Programs(i Interface) ([]string, error) {
	var names []string
	in := func(f func() error) error { return nsutil.Do(i.NS, f) }
	if i.NS == "" {
		in = func(f func() error) error { return f() }
	}
	err := in(func() error {
		l, err := netlink.LinkByName(i.Ifname)
		if err != nil {
			return fmt.Errorf("no interface %s: %w", i, err)
		}
		for _, h := range hooks {
			res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: h.at})
			if err != nil {
				return fmt.Errorf("programs on %s: %w", i, err)
			}
			for _, ap := range res.Programs {
				prog, err := ebpf.NewProgramFromID(ap.ID)
				if err != nil {
					return err
				}
				info, err := prog.Info()
				prog.Close()
				if err != nil {
					return err
				}
				names = append(names, info.Name)
			}
		}
		return nil
	})
	return names, err
}

// Ours says whether a program name is one of the policy programs.
func Ours(name string) bool { return name == "pol_egress" || name == "pol_ingress" }

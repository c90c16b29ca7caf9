package knob

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// CC is the TCP congestion control of the pods' namespaces.
const CC Name = "cc"

// The sysctls of the cc knob: the namespace's default congestion control,
// what the kernel has, and what a namespace other than the root one may set.
const (
	ccSysctl        = "net.ipv4.tcp_congestion_control"
	ccAvailable     = "net.ipv4.tcp_available_congestion_control"
	ccAllowedSysctl = "net.ipv4.tcp_allowed_congestion_control"
)

var ccRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func init() {
	register(Knob{Name: CC, Scope: Lab, order: 64, Example: "reno", Applier: cc{},
		canonical: func(v string) (string, error) {
			if !ccRE.MatchString(v) {
				return "", fmt.Errorf("cc %q: name a TCP congestion control (cubic, bbr, reno: /proc/sys/%s)", v, strings.ReplaceAll(ccAvailable, ".", "/"))
			}
			return v, nil
		},
		Help: "TCP congestion control of the pods' namespaces (net.ipv4.tcp_congestion_control in each, never the root namespace's): one the kernel has, e.g. cubic, bbr; default: the namespaces' own"})
}

// cc sets net.ipv4.tcp_congestion_control in every namespace the tests'
// sockets live in (the pods'; a podless mode's nodes), never the root
// namespace's; the proof reads it back in each.
type cc struct{}

func (cc) Set(p Path, v string) error {
	nss := p.Sockets()
	if len(nss) == 0 {
		return fmt.Errorf("cc %s: the lab has no pod namespace to set it in", v)
	}
	for _, ns := range nss {
		if ns == "" {
			return fmt.Errorf("cc %s: a pod without its namespace (the root namespace's is never set)", v)
		}
		avail, err := nsutil.ReadSysctl(ns, ccAvailable)
		if err != nil {
			return fmt.Errorf("cc %s in %s: %w", v, ns, err)
		}
		if have := strings.Fields(avail); !slices.Contains(have, v) {
			return fmt.Errorf("cc %s is not available in this kernel (available: %s)", v, strings.Join(have, ", "))
		}
		err = nsutil.Sysctl(ns, ccSysctl, v)
		if errors.Is(err, unix.EPERM) {
			allowed, _ := nsutil.ReadSysctl(ns, ccAllowedSysctl)
			return fmt.Errorf("cc %s refused in %s: outside the root namespace the kernel sets only the allowed ones (%s: %s)", v, ns, ccAllowedSysctl, strings.Join(strings.Fields(allowed), ", "))
		}
		if err != nil {
			return fmt.Errorf("cc %s refused in %s: %w", v, ns, err)
		}
	}
	return nil
}

// Read is each namespace's congestion control.
func (cc) Read(p Path, v string) ([]results.KnobProof, error) {
	var out []results.KnobProof
	for _, ns := range p.Sockets() {
		got, err := nsutil.ReadSysctl(ns, ccSysctl)
		if err != nil {
			return nil, fmt.Errorf("read back %s in %s: %w", ccSysctl, ns, err)
		}
		f := results.KnobProof{Knob: string(CC), Wanted: v, Got: got, Where: ns}
		if v != "" && got != v {
			f.NotApplied = fmt.Sprintf("%s is %s, not %s", ccSysctl, got, v)
		}
		out = append(out, f)
	}
	return out, nil
}

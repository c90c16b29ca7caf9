package knob

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/results"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Qdisc is the root qdisc of the pods' node-side devices: what queues the
// packets a node sends to its pods.
const Qdisc Name = "qdisc"

// Qdiscs are the qdiscs the knob sets (their kernel names).
var Qdiscs = []string{"noqueue", "fq", "fq_codel", "pfifo_fast"}

func init() {
	register(Knob{Name: Qdisc, Scope: Lab, order: 62, Example: "fq", Applier: qdisc{},
		canonical: func(v string) (string, error) {
			if !slices.Contains(Qdiscs, v) {
				return "", fmt.Errorf("qdisc %q: use one of %s", v, strings.Join(Qdiscs, ", "))
			}
			return v, nil
		},
		Help: "root qdisc of the pods' node-side devices (a veth's node end; a macvlan's parent): " + strings.Join(Qdiscs, ", ") + "; default: the mode's (a veth's is noqueue)"})
}

// qdisc replaces the root qdisc of every pod's node-side device (the
// device the pod's interface is linked to, in its node: a veth's peer, a
// macvlan's parent), through netlink's qdisc API; the proof reads the
// root qdisc back.
type qdisc struct{}

// noDevice is why a mode whose pods have no node-side device takes no qdisc.
const noDevice = "the mode's pods have no node-side device to queue on"

// device is a pod's node-side device.
type device struct{ ns, name, kind string }

func (d device) where() string { return fmt.Sprintf("%s (%s) in %s", d.name, d.kind, d.ns) }

// devices are the pods' node-side devices, each once (pods share a
// macvlan's parent); a pod whose interface is linked to none (a tap, a
// podless mode) has none.
func (qdisc) devices(p Path) ([]device, error) {
	var out []device
	for _, pod := range p.Pods {
		var peer int
		err := nsutil.Do(pod.NS, func() error {
			lk, err := netlink.LinkByName(pod.Ifname)
			if err == nil && lk.Attrs().NetNsID >= 0 {
				peer = lk.Attrs().ParentIndex
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("%s in %s: %w", pod.Ifname, pod.NS, err)
		}
		if peer == 0 || pod.NodeNS == "" {
			continue
		}
		d := device{ns: pod.NodeNS}
		err = nsutil.Do(pod.NodeNS, func() error {
			lk, err := netlink.LinkByIndex(peer)
			if err == nil {
				d.name, d.kind = lk.Attrs().Name, lk.Type()
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("the node-side device of %s in %s: %w", pod.Ifname, pod.NS, err)
		}
		if !slices.ContainsFunc(out, func(o device) bool { return o.ns == d.ns && o.name == d.name }) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (q qdisc) Set(p Path, v string) error {
	devs, err := q.devices(p)
	if err != nil {
		return err
	}
	if len(devs) == 0 {
		return fmt.Errorf("qdisc %s: %s", v, noDevice)
	}
	for _, d := range devs {
		err := nsutil.Do(d.ns, func() error {
			lk, err := netlink.LinkByName(d.name)
			if err != nil {
				return err
			}
			return netlink.QdiscReplace(&netlink.GenericQdisc{QdiscType: v,
				QdiscAttrs: netlink.QdiscAttrs{LinkIndex: lk.Attrs().Index, Parent: netlink.HANDLE_ROOT}})
		})
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%s: qdisc %s refused: this kernel does not have it (sch_%s)", d.where(), v, v)
		}
		if err != nil {
			return fmt.Errorf("%s: qdisc %s refused: %w", d.where(), v, err)
		}
	}
	return nil
}

// Read is each device's root qdisc (noqueue when it has none).
func (q qdisc) Read(p Path, v string) ([]results.KnobProof, error) {
	devs, err := q.devices(p)
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 && v != "" {
		return []results.KnobProof{{Knob: string(Qdisc), Wanted: v, Where: "the lab's pods", NotApplied: noDevice}}, nil
	}
	var out []results.KnobProof
	for _, d := range devs {
		f := results.KnobProof{Knob: string(Qdisc), Wanted: v, Where: d.where(), Got: "noqueue"}
		err := nsutil.Do(d.ns, func() error {
			lk, err := netlink.LinkByName(d.name)
			if err != nil {
				return err
			}
			qs, err := netlink.QdiscList(lk)
			if i := slices.IndexFunc(qs, func(q netlink.Qdisc) bool { return q.Attrs().Parent == netlink.HANDLE_ROOT }); i >= 0 {
				f.Got = qs[i].Type()
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("read back the qdisc of %s: %w", d.where(), err)
		}
		if v != "" && f.Got != v {
			f.NotApplied = fmt.Sprintf("root qdisc is %s, not %s", f.Got, v)
		}
		out = append(out, f)
	}
	return out, nil
}

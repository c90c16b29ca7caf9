package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vnetlab/vnetlab/internal/datapath/tcbpf"
)

// linkWatcher puts the Service programs on every pod's node-side veth: the
// ports of the CNI's bridge (Debian's bridge plugin makes one veth per pod
// and enslaves its node end), or the veths whose name starts with prefix
// (vnetlab's CNI names every pod's node end vnl+hex, in veth-routed and
// bridge modes alike). A pod's packets to a clusterIP are
// translated as they enter the node, its replies translated back as they
// leave it (tcbpf.NodeSide). Netlink notifications bring new pods; the
// process runs in the node's namespace, so the socket listens there.
type linkWatcher struct {
	plane  *tcbpf.Plane
	ns     string
	bridge string // one of bridge and prefix is set
	prefix string
	logf   func(string, ...any)
	// attached: node-side veth names carrying the programs, by ifindex.
	attached map[int]string
}

func (w *linkWatcher) run(ctx context.Context) error {
	w.attached = map[int]string{}
	updates := make(chan netlink.LinkUpdate, 256)
	done := make(chan struct{})
	defer close(done)
	subErr := make(chan error, 1)
	// Subscribe first, then list: a pod made in between is seen twice,
	// never missed.
	if err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(err error) {
			select {
			case subErr <- err:
			default:
			}
		},
	}); err != nil {
		return fmt.Errorf("netlink subscribe: %w", err)
	}
	if err := w.adopt(); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-subErr:
			return fmt.Errorf("netlink: %w", err)
		case u, ok := <-updates:
			if !ok {
				return errors.New("netlink: the link subscription closed")
			}
			if u.Header.Type == unix.RTM_DELLINK {
				w.gone(int(u.Index))
				continue
			}
			w.consider(u.Link)
		}
	}
}

// adopt takes over the endpoints a previous proxy attached (still
// attached: left alone, so their flows see no gap), removes those whose
// veth has gone, and attaches the bridge's ports that have none.
func (w *linkWatcher) adopt() error {
	eps, err := w.plane.ListEndpoints()
	if err != nil {
		return err
	}
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	byName := map[string]netlink.Link{}
	for _, l := range links {
		byName[l.Attrs().Name] = l
	}
	for _, ep := range eps {
		l, ok := byName[ep.Ifname]
		if ep.NS == w.ns && ep.Attached && ok {
			w.attached[l.Attrs().Index] = ep.Ifname
			continue
		}
		if err := w.plane.DetachEndpoint(ep.NS, ep.Ifname); err != nil {
			w.logf("stale endpoint %s: %v", ep.Ifname, err)
		}
	}
	for _, l := range links {
		w.consider(l)
	}
	return nil
}

// podVeth says whether l is a pod's node-side veth: a port of the bridge,
// or a veth named with the prefix.
func (w *linkWatcher) podVeth(l netlink.Link) bool {
	a := l.Attrs()
	if l.Type() != "veth" {
		return false
	}
	if w.prefix != "" {
		return strings.HasPrefix(a.Name, w.prefix)
	}
	if a.MasterIndex == 0 {
		return false
	}
	master, err := netlink.LinkByIndex(a.MasterIndex)
	return err == nil && master.Attrs().Name == w.bridge
}

// consider attaches the programs to a pod's node-side veth.
func (w *linkWatcher) consider(l netlink.Link) {
	a := l.Attrs()
	if _, done := w.attached[a.Index]; done || !w.podVeth(l) {
		return
	}
	// A name reused by a new veth (the old one's pins are stale).
	for idx, name := range w.attached {
		if name == a.Name {
			w.gone(idx)
		}
	}
	if _, err := w.plane.AttachEndpoint(w.ns, a.Name, tcbpf.NodeSide); err != nil {
		_ = w.plane.DetachEndpoint(w.ns, a.Name)
		if _, err = w.plane.AttachEndpoint(w.ns, a.Name, tcbpf.NodeSide); err != nil {
			w.logf("attach %s: %v", a.Name, err)
			return
		}
	}
	w.attached[a.Index] = a.Name
	w.logf("attached the Service programs to %s (pod veth, ifindex %d)", a.Name, a.Index)
}

// gone removes a deleted veth's pins (its links are dead already).
func (w *linkWatcher) gone(idx int) {
	name, ok := w.attached[idx]
	if !ok {
		return
	}
	delete(w.attached, idx)
	if err := w.plane.DetachEndpoint(w.ns, name); err != nil {
		w.logf("detach %s: %v", name, err)
	}
}

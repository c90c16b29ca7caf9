// Package pktstat counts the packets each device of the watched network
// namespaces transmits and receives, with their bytes and segments
// (bpf/pktsize.c), so that every cell of a run records the average packet
// at the sender's transmit and at the receiver's GRO: what an MTU, a
// GSO/GRO size or an offload knob changed, seen in the packets themselves.
// It runs in every lab run, attached only around each cell's
// proof sample, never in a measured one: attached, it costs every packet at
// every device it crosses (10-14% of a veth-routed tcp_rr, more on paths of
// more hops). Open's error says why it cannot run.
package pktstat

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Dir is which way a packet went through its device.
type Dir uint32

const (
	Tx Dir = 0 // net_dev_xmit
	Rx Dir = 1 // netif_receive_skb
)

// Key is one device of one namespace, one direction.
type Key struct {
	NetNS   uint32 // the namespace's inode number
	Ifindex uint32
	Dir     Dir
}

// Count is what went through a Key.
type Count struct {
	Packets, Bytes, Segs uint64
	Max                  uint64 // largest packet; in a difference, the larger of the two
}

// Snapshot is every Key's totals at one moment.
type Snapshot map[Key]Count

// sumCPUs is a key's count from its per-CPU values (Max the largest).
func sumCPUs(vals []pktsizePktCount) Count {
	var sum Count
	for _, v := range vals {
		sum.Packets += v.Packets
		sum.Bytes += v.Bytes
		sum.Segs += v.Segs
		sum.Max = max(sum.Max, v.Max)
	}
	return sum
}

// Sub is s minus earlier (Max stays s's: the counters keep a maximum).
func (s Snapshot) Sub(earlier Snapshot) Snapshot {
	out := Snapshot{}
	for k, c := range s {
		e := earlier[k]
		if d := (Count{Packets: c.Packets - e.Packets, Bytes: c.Bytes - e.Bytes, Segs: c.Segs - e.Segs, Max: c.Max}); d.Packets > 0 {
			out[k] = d
		}
	}
	return out
}

// Add adds d into s (the sums of a cell's samples; Max the largest).
func (s Snapshot) Add(d Snapshot) {
	for k, c := range d {
		a := s[k]
		a.Packets += c.Packets
		a.Bytes += c.Bytes
		a.Segs += c.Segs
		a.Max = max(a.Max, c.Max)
		s[k] = a
	}
}

// Counter holds the programs and maps: file descriptors of this process
// only, nothing pinned, so the kernel detaches everything when it exits.
// Loaded, it costs nothing; it counts only between Attach and Detach.
type Counter struct {
	objs  pktsizeObjects
	links []link.Link
}

// Open loads the counter, detached.
func Open() (*Counter, error) {
	c := &Counter{}
	if err := loadPktsizeObjects(&c.objs, nil); err != nil {
		return nil, fmt.Errorf("load the packet-size counter: %w", err)
	}
	return c, nil
}

// Attach starts counting from zero, so that what the next Snapshot reads,
// a packet's maximum too, is this window's own: the programs go onto
// their tracepoints.
func (c *Counter) Attach() error {
	if c.links != nil {
		return nil
	}
	if err := c.reset(); err != nil {
		return err
	}
	for _, prog := range []*ebpf.Program{c.objs.OnXmit, c.objs.OnReceive} {
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			c.Detach()
			return fmt.Errorf("attach the packet-size counter %s: %w", prog, err)
		}
		c.links = append(c.links, l)
	}
	return nil
}

// reset empties the counts (detached: nothing adds to them meanwhile).
func (c *Counter) reset() error {
	var (
		k    pktsizePktKey
		vals []pktsizePktCount
		keys []pktsizePktKey
	)
	it := c.objs.PktCounts.Iterate()
	for it.Next(&k, &vals) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read the packet-size counts: %w", err)
	}
	for _, k := range keys {
		if err := c.objs.PktCounts.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("reset the packet-size counts: %w", err)
		}
	}
	return nil
}

// Detach stops counting: the tracepoints are left as they were, and no
// packet pays for the counter until the next Attach.
func (c *Counter) Detach() {
	for _, l := range c.links {
		l.Close()
	}
	c.links = nil
}

// Close detaches and frees everything.
func (c *Counter) Close() {
	c.Detach()
	c.objs.Close()
}

// Watch adds the named network namespaces to those counted.
func (c *Counter) Watch(namespaces ...string) error {
	for _, ns := range namespaces {
		ino, err := Inode(ns)
		if err != nil {
			return err
		}
		if err := c.objs.WatchNetns.Put(ino, uint8(1)); err != nil {
			return fmt.Errorf("watch %s: %w", ns, err)
		}
	}
	return nil
}

// Inode is the named namespace's inode number, as the counter keys it.
func Inode(ns string) (uint32, error) {
	ino, err := nsutil.Inode(nsutil.Path(ns))
	if err != nil {
		return 0, fmt.Errorf("namespace %s: %w", ns, err)
	}
	return uint32(ino), nil
}

// Snapshot reads every Key's totals, summed over the CPUs.
func (c *Counter) Snapshot() (Snapshot, error) {
	out := Snapshot{}
	var (
		k    pktsizePktKey
		vals []pktsizePktCount
	)
	it := c.objs.PktCounts.Iterate()
	for it.Next(&k, &vals) {
		out[Key{NetNS: k.Netns, Ifindex: k.Ifindex, Dir: Dir(k.Dir)}] = sumCPUs(vals)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read the packet-size counts: %w", err)
	}
	return out, nil
}

package polnft

import (
	"errors"
	"sync"
	"syscall"

	"github.com/google/nftables"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Apply is what writes changes into a namespace's table ("": the
// caller's) that holds the rules they start from, so that it holds r, in
// one transaction whichever way:
//   - when all the changes do is take Allows from buckets that keep one and
//     add Allows to buckets that had one (a policy deleted or added, a peer
//     gone or come: a Compiler's Changes say so), it writes them through
//     netlink (editsOf): each taken Allow's rules deleted, found in its
//     bucket chain by its comment (ruleKey), each added one's appended;
//   - otherwise, or when the table is not what the changes say, it writes
//     their Delta (made once, for every namespace) as change does.
//
// Netlink is what makes an Allow cost what it changes. Delta would flush a
// bucket chain that loses an Allow and add its other rules again: every
// rule added with a verdict has the kernel check the jumps of the whole
// table at commit (nft_table_validate: about 2 ms at 10,000 rules here),
// and nft, having deleted rules, waits for a grace period as it closes its
// socket. A deletion by handle has nothing to check, and no nft process
// starts (about 5 ms here before nft writes a thing).
func Apply(changes []netpol.PodChange, r *netpol.Rules) func(ns string) error {
	ed, byEdits := editsOf(changes, Buckets)
	delta := sync.OnceValue(func() string { return Delta(changes) })
	return func(ns string) error {
		if byEdits {
			err := ed.write(ns)
			switch {
			case err == nil:
				return nil
			case errors.Is(err, syscall.ENOBUFS):
				// Acknowledgements dropped: the edits may be in the
				// table, and a delta would add their rules again.
				return Load(ns, Script(r))
			}
		}
		return change(ns, delta(), r)
	}
}

// conn is a netlink connection to nf_tables in namespace ns ("": the
// caller's), and what closes it.
func conn(ns string) (*nftables.Conn, func(), error) {
	opts := []nftables.ConnOption{nftables.AsLasting()}
	closeNS := func() {}
	if ns != "" {
		h, err := nsutil.FD(ns)
		if err != nil {
			return nil, nil, err
		}
		closeNS = func() { _ = h.Close() }
		opts = append(opts, nftables.WithNetNSFd(int(h)))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		closeNS()
		return nil, nil, err
	}
	return c, func() { _ = c.CloseLasting(); closeNS() }, nil
}

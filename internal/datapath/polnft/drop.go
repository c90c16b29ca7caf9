package polnft

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
	"github.com/vnetlab/vnetlab/internal/system/nsutil"
)

// Apply is what writes changes into a namespace's table ("": the
// caller's) that holds the rules they start from, so that it holds r.
// When all the changes do is take Allows from buckets that keep others (a
// policy deleted, a peer gone: a Compiler's Changes say so), it deletes
// those Allows' rules through netlink, each found in its bucket chain by
// its comment (ruleKey), in one transaction. Otherwise, or when a rule is
// not where the changes say, it writes their Delta (made once, for every
// namespace) as change does.
//
// Deleting rules by handle is what makes a taken Allow cost what it
// changes. Delta would flush the bucket chain and add its other rules
// again: every rule added with a verdict has the kernel check the jumps
// of the whole table at commit (nft_table_validate: about 2 ms at 10,000
// rules here), and nft, having deleted rules, waits for a grace period as
// it closes its socket. A deletion by handle has nothing to check, and
// starts no nft process (about 5 ms here before nft writes a thing).
func Apply(changes []netpol.PodChange, r *netpol.Rules) func(ns string) error {
	dr, byDrops := dropsOf(changes, Buckets)
	delta := sync.OnceValue(func() string { return Delta(changes) })
	return func(ns string) error {
		if byDrops && dr.delete(ns) == nil {
			return nil
		}
		return change(ns, delta(), r)
	}
}

// ruleKey is the comment of the rule whose text after its chain is r: a
// hash of that text (FNV-1a, 64 bits, in hex). Two rules of one key in a
// bucket are the same rule, so deleting either is alike, but for a
// collision of the hash (odds of about 2^-64 a pair of rules).
func ruleKey(r string) string {
	h := fnv.New64a()
	h.Write([]byte(r))
	return strconv.FormatUint(h.Sum64(), 16)
}

// drops is rules to delete: per bucket chain, the key of each (a key once
// per rule).
type drops map[string][]string

// dropsOf is the rules whose deletion turns the table of the changes' Old
// sides into that of their New sides, when that is all it takes (ok):
// every changed side of a pod only lost Allows, from buckets that keep
// others (a bucket emptied is a jump taken from the pod chain).
func dropsOf(changes []netpol.PodChange, nb uint64) (dr drops, ok bool) {
	dr = drops{}
	for _, c := range changes {
		if c.Delta == nil {
			return nil, false
		}
		for _, d := range directions {
			if !d.dropped(dr, c, nb) {
				return nil, false
			}
		}
	}
	return dr, len(dr) > 0
}

// dropped adds to dr the rules of the Allows side d of change c lost, and
// says whether that is all the side's change is: whether each bucket the
// Allows went from keeps one (holdsEach, as appended asks it).
func (d direction) dropped(dr drops, c netpol.PodChange, nb uint64) bool {
	sd := d.sideDelta(c.Delta)
	switch {
	case len(sd.Came)+len(sd.Went) == 0:
		return true
	case len(sd.Came) > 0 || !d.side(c.New).Isolated:
		return false
	}
	went := make([]uint64, len(sd.Went))
	for i, a := range sd.Went {
		went[i] = a.Hash() % nb
	}
	if !holdsEach(d.side(c.New).Allow, slices.Values(went), nb) {
		return false
	}
	for _, a := range sd.Went {
		b := bucket(d.chain(c.New), int(a.Hash()%nb))
		for _, m := range allow(a, d.peer) {
			dr[b] = append(dr[b], ruleKey(m+d.verdict))
		}
	}
	return true
}

// delete deletes the rules of dr from the table in namespace ns, in one
// transaction: none when a chain lacks one of them.
func (dr drops) delete(ns string) error {
	opts := []nftables.ConnOption{nftables.AsLasting()}
	if ns != "" {
		h, err := nsutil.FD(ns)
		if err != nil {
			return err
		}
		defer h.Close()
		opts = append(opts, nftables.WithNetNSFd(int(h)))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t := &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}
	for _, name := range slices.Sorted(maps.Keys(dr)) {
		chain := &nftables.Chain{Name: name, Table: t}
		rules, err := c.GetRules(t, chain)
		if err != nil {
			return fmt.Errorf("reading chain %s: %w", name, err)
		}
		want := map[string]int{}
		for _, k := range dr[name] {
			want[k]++
		}
		missing := len(dr[name])
		for _, x := range rules {
			k, _ := userdata.GetString(x.UserData, userdata.TypeComment)
			if want[k] == 0 {
				continue
			}
			want[k]--
			missing--
			x.Table, x.Chain = t, chain
			if err := c.DelRule(x); err != nil {
				return err
			}
		}
		if missing > 0 {
			return fmt.Errorf("chain %s lacks %d of the rules to delete", name, missing)
		}
	}
	return c.Flush()
}

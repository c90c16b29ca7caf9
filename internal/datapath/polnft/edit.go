package polnft

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"

	"github.com/vnetlab/vnetlab/internal/datapath/netpol"
)

// ruleKey is the comment of the rule whose text after its chain is r: a
// hash of that text (FNV-1a, 64 bits, in hex). Two rules of one key in a
// bucket are the same rule, so deleting either is alike, but for a
// collision of the hash (odds of about 2^-64 a pair of rules).
func ruleKey(r string) string {
	h := fnv.New64a()
	h.Write([]byte(r))
	return strconv.FormatUint(h.Sum64(), 16)
}

// edits is a change written through netlink, in one transaction: rules
// deleted from bucket chains (per chain, the key of each, a key once per
// rule), then rules appended to bucket chains.
type edits struct {
	drops map[string][]string
	adds  []added
}

// added is an Allow whose rules are appended to a bucket chain, of
// direction d.
type added struct {
	appendTo
	d direction
}

// maxMessages is the most messages one transaction of edits sends. Each is
// acknowledged, and the acknowledgements wait in the socket's receive
// buffer until the transaction's last is sent: too many, and the kernel
// drops them after committing, so that the writer cannot know what is in
// the table. With the default buffer (212,992 bytes), 32 rules added at a
// time (at most 160 messages) always fitted here and 64 did not
// (TestAddedRulesListAsNft, VNETLAB_POLNFT_CHUNK). A larger change is an
// nft transaction (Delta).
const maxMessages = 80

// messages is how many messages the transaction of e sends at most: one
// per rule deleted; per rule added, the rule and, for each of its two
// anonymous sets, the set and its elements.
func (e edits) messages() int {
	n := 0
	for _, keys := range e.drops {
		n += len(keys)
	}
	for _, x := range e.adds {
		n += 5 * len(matchesOf(x.a))
	}
	return n
}

// editsOf is the edits that turn the table of the changes' Old sides into
// that of their New sides, when that is all it takes (ok): every changed
// side of a pod, isolated before and after, took Allows from buckets that
// keep one and added Allows to buckets that had one (so no pod chain
// changes: a bucket emptied or new is a jump taken or added), each Allow
// one nftExprs writes, and no more than maxMessages in all.
func editsOf(changes []netpol.PodChange, nb uint64) (e edits, ok bool) {
	e.drops = map[string][]string{}
	for _, c := range changes {
		if c.Delta == nil {
			return edits{}, false
		}
		for _, d := range directions {
			if !d.edited(&e, c, nb) {
				return edits{}, false
			}
		}
	}
	n := e.messages()
	return e, n > 0 && n <= maxMessages
}

// edited adds to e the side d of change c, and says whether that is all
// the side's change is (editsOf). Whether a bucket is there before or
// after is found by hashing the side's Allows only until one of each
// bucket asked turns up (holdsEach).
func (d direction) edited(e *edits, c netpol.PodChange, nb uint64) bool {
	sd := d.sideDelta(c.Delta)
	switch {
	case len(sd.Came)+len(sd.Went) == 0:
		return true
	case !d.side(c.New).Isolated || !d.side(c.Old).Isolated:
		return false
	}
	if !holdsEach(d.side(c.New).Allow, bucketsOf(sd.Went, nb), nb) || !holdsEach(d.side(c.Old).Allow, bucketsOf(sd.Came, nb), nb) {
		return false
	}
	for _, a := range sd.Went {
		b := bucket(d.chain(c.New), int(a.Hash()%nb))
		for _, r := range d.ruleTexts(a) {
			e.drops[b] = append(e.drops[b], ruleKey(r))
		}
	}
	for _, x := range d.inBuckets(c, sd.Came, nb) {
		if !writable(x.a) {
			return false
		}
		e.adds = append(e.adds, added{x, d})
	}
	return true
}

// write makes the edits of e to the table in namespace ns ("": the
// caller's), in one transaction: none when a chain lacks a rule to delete
// or a chain is not there. Each rule is found by its comment (ruleKey);
// each added is the one Delta's `add rule` would make, with the same
// comment.
func (e edits) write(ns string) error {
	if n := e.messages(); n > maxMessages {
		return fmt.Errorf("%d messages, more than the %d of one netlink transaction", n, maxMessages)
	}
	c, done, err := conn(ns)
	if err != nil {
		return err
	}
	defer done()
	t := &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}
	for _, name := range slices.Sorted(maps.Keys(e.drops)) {
		chain := &nftables.Chain{Name: name, Table: t}
		rules, err := c.GetRules(t, chain)
		if err != nil {
			return fmt.Errorf("reading chain %s: %w", name, err)
		}
		want := map[string]int{}
		for _, k := range e.drops[name] {
			want[k]++
		}
		missing := len(e.drops[name])
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
	for _, x := range e.adds {
		chain := &nftables.Chain{Name: x.chain, Table: t}
		texts := x.d.ruleTexts(x.a)
		for i, m := range matchesOf(x.a) {
			ex, err := x.d.nftExprs(c, t, m, x.a)
			if err != nil {
				return err
			}
			c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: ex,
				UserData: userdata.AppendString(nil, userdata.TypeComment, ruleKey(texts[i]))})
		}
	}
	return c.Flush()
}

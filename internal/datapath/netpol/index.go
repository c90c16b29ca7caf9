package netpol

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// selIndex finds the label selectors that may match a label set without
// trying every one: each selector is filed under one requirement every
// set it matches meets (a key and value it requires, else a key it
// requires, else nowhere in particular), and a label set looks only under
// its own keys and key-value pairs. Its answer is a superset of the
// selectors that match, which the caller then matches exactly.
//
// Entries are what the caller files selectors for (a policy's key), each
// counted once per selector filed for it.
type selIndex map[string]map[string]int

// Buckets: "=k\x00v" holds selectors requiring label k=v, "?k" those
// requiring key k, "*" the others.
const anyBucket = "*"

func kvBucket(k, v string) string { return "=" + k + "\x00" + v }
func keyBucket(k string) string   { return "?" + k }

// bucket is where selector sel is filed: a pair of its matchLabels (the
// least key), else an In with one value, else a key an In or Exists
// requires, else anyBucket.
func bucket(sel *metav1.LabelSelector) string {
	if len(sel.MatchLabels) > 0 {
		k := slices.Min(mapKeys(sel.MatchLabels))
		return kvBucket(k, sel.MatchLabels[k])
	}
	key := ""
	for _, e := range sel.MatchExpressions {
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if len(e.Values) == 1 {
				return kvBucket(e.Key, e.Values[0])
			}
			if key == "" && len(e.Values) > 0 {
				key = e.Key
			}
		case metav1.LabelSelectorOpExists:
			if key == "" {
				key = e.Key
			}
		}
	}
	if key != "" {
		return keyBucket(key)
	}
	return anyBucket
}

func mapKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// add files sel for entry (delta 1) or takes one filing back (delta -1).
func (x selIndex) add(sel *metav1.LabelSelector, entry string, delta int) {
	b := bucket(sel)
	m := x[b]
	if m == nil {
		m = map[string]int{}
		x[b] = m
	}
	m[entry] += delta
	if m[entry] <= 0 {
		delete(m, entry)
		if len(m) == 0 {
			delete(x, b)
		}
	}
}

// candidates calls visit with every entry filed for a selector that may
// match labels l (an entry may come more than once).
func (x selIndex) candidates(l Labels, visit func(entry string)) {
	if len(x) == 0 {
		return
	}
	each := func(b string) {
		for e := range x[b] {
			visit(e)
		}
	}
	each(anyBucket)
	for k, v := range l {
		each(kvBucket(k, v))
		each(keyBucket(k))
	}
}

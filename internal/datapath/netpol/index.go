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
	count(x, bucket(sel), entry, delta)
}

// count adds delta to entry's count under b, dropping what reaches 0.
func count[X ~map[string]map[string]int](x X, b, entry string, delta int) {
	m := x[b]
	if m == nil {
		m = map[string]int{}
		x[b] = m
	}
	if m[entry] += delta; m[entry] <= 0 {
		delete(m, entry)
		if len(m) == 0 {
			delete(x, b)
		}
	}
}

// inNamespace is m's index of namespace ns, made if it has none.
func inNamespace[X ~map[string]map[string]int](m map[string]X, ns string) X {
	x := m[ns]
	if x == nil {
		x = X{}
		m[ns] = x
	}
	return x
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

// keyIndex finds the label selectors that read a label key: each
// selector is filed under every key its matchLabels and matchExpressions
// name. A pod whose labels alone change keeps every other selector's
// answer, so only these are asked again.
//
// Entries are what the caller files selectors for (a policy's key), each
// counted once per key per selector filed for it.
type keyIndex map[string]map[string]int

// add files sel for entry (delta 1) or takes one filing back (delta -1).
func (x keyIndex) add(sel *metav1.LabelSelector, entry string, delta int) {
	for k := range sel.MatchLabels {
		count(x, k, entry, delta)
	}
	for _, e := range sel.MatchExpressions {
		count(x, e.Key, entry, delta)
	}
}

// reading calls visit with every entry filed for a selector that reads
// one of keys (an entry may come more than once).
func (x keyIndex) reading(keys []string, visit func(entry string)) {
	for _, k := range keys {
		for e := range x[k] {
			visit(e)
		}
	}
}

// changedKeys are the label keys whose presence or value differs between
// a and b.
func changedKeys(a, b Labels) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

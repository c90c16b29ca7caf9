package polnft

import "testing"

// What Read finds: nft's JSON listing (as nft 1.0.6 writes it), objects
// and counters, and what a script makes.
func TestReadBack(t *testing.T) {
	listing := `{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}},
{"table": {"family": "inet", "name": "vnetlab-netpol", "handle": 3}},
{"counter": {"family": "inet", "name": "ingress-default/pod-a/evaluated", "table": "vnetlab-netpol", "handle": 1, "packets": 12, "bytes": 720}},
{"counter": {"family": "inet", "name": "ingress-default/pod-a/denied", "table": "vnetlab-netpol", "handle": 2, "packets": 2, "bytes": 120}},
{"map": {"family": "inet", "name": "ingress-v4", "table": "vnetlab-netpol", "type": "ipv4_addr", "handle": 4, "map": "verdict", "elem": [["192.168.10.10", {"goto": {"target": "ingress-default/pod-a"}}]]}},
{"map": {"family": "inet", "name": "egress-v4", "table": "vnetlab-netpol", "type": "ipv4_addr", "handle": 3, "map": "verdict"}},
{"chain": {"family": "inet", "table": "vnetlab-netpol", "name": "ingress-default/pod-a", "handle": 9}},
{"chain": {"family": "inet", "table": "vnetlab-netpol", "name": "ingress-default/pod-a/17", "handle": 13}},
{"rule": {"family": "inet", "table": "vnetlab-netpol", "chain": "ingress-default/pod-a/17", "handle": 14, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": {"prefix": {"addr": "198.18.0.0", "len": 32}}}}, {"accept": null}]}},
{"rule": {"family": "inet", "table": "vnetlab-netpol", "chain": "ingress-default/pod-a", "handle": 10, "expr": [{"counter": "ingress-default/pod-a/evaluated"}]}},
{"rule": {"family": "inet", "table": "vnetlab-netpol", "chain": "ingress-default/pod-a", "handle": 11, "expr": [{"jump": {"target": "ingress-default/pod-a/17"}}]}},
{"rule": {"family": "inet", "table": "vnetlab-netpol", "chain": "ingress-default/pod-a", "handle": 12, "expr": [{"counter": "ingress-default/pod-a/denied"}, {"drop": null}]}}]}`
	p, err := parseListing([]byte(listing))
	if err != nil {
		t.Fatal(err)
	}
	if p != (Held{Objects: 5, Evaluated: 12, Denied: 2}) {
		t.Errorf("nft: %+v, want 4 rules and 1 element, 12 evaluated, 2 denied", p)
	}
	script := "add counter inet t c/evaluated\nadd rule inet t c counter name c/evaluated\nadd element inet t ingress-v4 { 192.168.10.10 : goto c, 192.168.10.11 : goto c }\nadd chain inet t c\n"
	if n := Objects(script); n != 3 {
		t.Errorf("Objects: %d, want 1 rule and 2 elements", n)
	}
}

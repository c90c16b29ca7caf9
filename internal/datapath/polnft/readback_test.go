package polnft

import "testing"

// What Read finds: nft's JSON listing (as nft 1.0.6 writes it), objects
// and counters, and what a script makes.
func TestReadBack(t *testing.T) {
	listing := `{"nftables": [{"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}},
{"table": {"family": "inet", "name": "vnetlab-netpol", "handle": 3}},
{"map": {"family": "inet", "name": "ingress-v4", "table": "vnetlab-netpol", "type": "ipv4_addr", "handle": 2, "map": "verdict", "elem": [["192.168.10.10", {"goto": {"target": "ingress-default/pod-a"}}]]}},
{"map": {"family": "inet", "name": "egress-v4", "table": "vnetlab-netpol", "type": "ipv4_addr", "handle": 3, "map": "verdict"}},
{"chain": {"family": "inet", "table": "vnetlab-netpol", "name": "ingress-default/pod-a", "handle": 9}},
{"rule": {"family": "inet", "table": "vnetlab-netpol", "chain": "ingress-default/pod-a", "handle": 10, "comment": "evaluated", "expr": [{"counter": {"packets": 12, "bytes": 720}}]}},
{"rule": {"family": "inet", "table": "vnetlab-netpol", "chain": "ingress-default/pod-a", "handle": 11, "expr": [{"match": {"op": "==", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": {"prefix": {"addr": "198.18.0.0", "len": 32}}}}, {"accept": null}]}},
{"rule": {"family": "inet", "table": "vnetlab-netpol", "chain": "ingress-default/pod-a", "handle": 12, "comment": "denied", "expr": [{"counter": {"packets": 2, "bytes": 120}}, {"drop": null}]}}]}`
	p, err := parseListing([]byte(listing))
	if err != nil {
		t.Fatal(err)
	}
	if p != (Held{Objects: 4, Evaluated: 12, Denied: 2}) {
		t.Errorf("nft: %+v, want 3 rules and 1 element, 12 evaluated, 2 denied", p)
	}
	script := "add rule inet t c counter\nadd element inet t ingress-v4 { 192.168.10.10 : goto c, 192.168.10.11 : goto c }\nadd chain inet t c\n"
	if n := Objects(script); n != 3 {
		t.Errorf("Objects: %d, want 1 rule and 2 elements", n)
	}
}

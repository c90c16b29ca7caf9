package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vnetlab/vnetlab/internal/platform/labpolicy"
)

// policy add/ls/del through the real binary on real labs: bad input gets
// one line on stderr and a non-zero exit, and leaves the lab's policies and
// its nodes' rules as they were; a mode whose packets the provider cannot
// see is refused before anything is loaded.
func TestPolicyCLI(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds network namespaces")
	}
	bin := vnetlabBin(t)
	up := func(lab, mode string) {
		runVnetlab(t, bin, "down", lab) // a previous run killed halfway
		if _, e, code := runVnetlab(t, bin, "up", "--name", lab, "--mode", mode); code != 0 {
			t.Fatalf("up %s: %s", mode, e)
		}
		t.Cleanup(func() {
			if _, e, code := runVnetlab(t, bin, "down", lab); code != 0 {
				t.Errorf("down %s: %s", lab, e)
			}
		})
	}
	const lab = "np-cli"
	up(lab, "veth-routed")
	dir := t.TempDir()
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	list := func(lab string) labpolicy.Listing {
		o, e, code := runVnetlab(t, bin, "policy", "ls", lab, "-o", "json")
		if code != 0 {
			t.Fatalf("policy ls: %s", e)
		}
		var l labpolicy.Listing
		if err := json.Unmarshal([]byte(o), &l); err != nil {
			t.Fatalf("policy ls -o json: %v\n%s", err, o)
		}
		return l
	}
	tables := func(lab string) string {
		out, err := exec.Command("ip", "netns", "exec", "vnl-"+lab+"-node", "nft", "list", "tables").CombinedOutput()
		if err != nil {
			t.Fatalf("nft list tables: %v: %s", err, out)
		}
		return string(out)
	}
	if o, _, _ := runVnetlab(t, bin, "policy", "ls", lab); !strings.Contains(o, "lab np-cli has no policies") {
		t.Errorf("policy ls of a lab without policies said:\n%s", o)
	}
	good := file("good.yaml", `
apiVersion: v1
kind: Pod
metadata: {name: pod-a, namespace: shop, labels: {app: web}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: shop}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: out, namespace: default}
spec: {podSelector: {matchLabels: {pod: pod-b}}, egress: [{to: [{ipBlock: {cidr: 10.0.0.0/8}}]}]}
`)
	if o, e, code := runVnetlab(t, bin, "policy", "add", lab, "-f", good); code != 0 || !strings.Contains(o, "2 policies, 0 namespaces, 1 pods added: lab np-cli, provider nftables, 2 policies") {
		t.Fatalf("policy add: exit %d, %s%s", code, o, e)
	}
	l := list(lab)
	if len(l.Policies) != 2 || !l.Installed || l.Policies[0].Selects[0] != "pod-a" || !l.Pods[0].IsolatedIngress || l.Pods[0].IsolatedEgress || !l.Pods[1].IsolatedEgress {
		t.Errorf("policy ls after add: %+v", l)
	}
	if !strings.Contains(tables(lab), labpolicy.NftTable) {
		t.Fatalf("no table %s in the node after policy add", labpolicy.NftTable)
	}
	const head = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: bad, namespace: shop}\nspec:\n  podSelector: {}\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"policy", "add", lab}, "no -f given"},
		{[]string{"policy", "add", lab, "-f", file("sel.yaml", head+"  ingress: [{from: [{podSelector: {matchExpressions: [{key: app, operator: Near}]}}]}]\n")}, `"Near" is not a valid label selector operator`},
		{[]string{"policy", "add", lab, "-f", file("cidr.yaml", head+"  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8, except: [11.0.0.0/16]}}]}]\n")}, "except[0] 11.0.0.0/16 is outside its cidr 10.0.0.0/8"},
		{[]string{"policy", "add", lab, "-f", file("end.yaml", head+"  ingress: [{ports: [{port: 90, endPort: 80}]}]\n")}, "endPort 80 is below port 90"},
		{[]string{"policy", "add", lab, "-f", file("named.yaml", head+"  ingress: [{ports: [{port: http}]}]\n")}, `no pod has a TCP port named "http"`},
		{[]string{"policy", "add", lab, "-f", file("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: pod-z}\n")}, `lab np-cli has no pod "pod-z"`},
		{[]string{"policy", "add", lab, "-f", good, "--provider", "bpfilter"}, `unknown policy provider "bpfilter"`},
		{[]string{"policy", "del", lab, "shop/nope"}, "lab np-cli has no policy shop/nope"},
		{[]string{"policy", "converge", lab, "--provider", "bpfilter"}, `unknown policy provider "bpfilter"`},
		{[]string{"policy", "converge", lab, "--policies", "200000"}, "--policies: policies 200000 is above the maximum 100000"},
		{[]string{"policy", "converge", lab}, "lab np-cli already has policies: policy converge loads its own"},
		{[]string{"run", "--modes", "veth-routed", "--policy-providers", "bpfilter"}, `--policy-providers: unknown policy provider "bpfilter"`},
		{[]string{"run", "--modes", "macvlan", "--policies", "10"}, "--policy-providers nftables cannot enforce policies in mode macvlan"},
		{[]string{"run", "--modes", "veth-routed", "--sweep", "policies=0,100001"}, "policies 100001 is above the maximum 100000"},
	} {
		o, e, code := runVnetlab(t, bin, c.args...)
		if code == 0 || !strings.Contains(e, c.want) || strings.Count(strings.TrimSpace(e), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q, want one line with %q (stdout %q)", c.args[1:], code, e, c.want, o)
		}
	}
	if l := list(lab); len(l.Policies) != 2 {
		t.Errorf("bad input changed the lab's policies: %+v", l.Policies)
	}
	if o, e, code := runVnetlab(t, bin, "policy", "del", lab, "shop/deny"); code != 0 || !strings.Contains(o, "policy shop/deny deleted") {
		t.Errorf("policy del: exit %d, %s%s", code, o, e)
	}
	if l := list(lab); len(l.Policies) != 1 || l.Pods[0].IsolatedIngress {
		t.Errorf("policy ls after del: %+v", l)
	}

	const mv = "np-climv"
	up(mv, "macvlan")
	_, e, code := runVnetlab(t, bin, "policy", "add", mv, "-f", good)
	if code == 0 || !strings.Contains(e, "policy provider nftables cannot serve lab np-climv of mode macvlan: packets between macvlan pods") {
		t.Errorf("policy add on macvlan: exit %d, %s", code, e)
	}
	if l := list(mv); len(l.Policies) != 0 || l.Installed || strings.Contains(tables(mv), labpolicy.NftTable) {
		t.Errorf("a refused mode was left with policies or rules: %+v", l)
	}
}

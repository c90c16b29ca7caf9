package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every runnable leaf verb's --help shows an example: cobra's Example field
// is set, runs the verb, and every vnetlab invocation in it names a verb
// and flags that exist.
func TestLeafVerbsHaveExamples(t *testing.T) {
	root := newRoot()
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if !c.HasSubCommands() && c.Runnable() {
			n++
			ex := strings.TrimSpace(c.Example)
			if ex == "" {
				t.Errorf("%q has no Example in its --help", c.CommandPath())
			} else if !strings.Contains(ex, c.CommandPath()) {
				t.Errorf("%q: its Example does not run it (no %q in %q)", c.CommandPath(), c.CommandPath(), ex)
			}
			for _, line := range strings.Split(ex, "\n") {
				for _, err := range exampleFlagErrors(root, line) {
					t.Errorf("%q's example %q: %s", c.CommandPath(), strings.TrimSpace(line), err)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 30 {
		t.Fatalf("walked %d leaf verbs; the tree was not walked", n)
	}
}

// exampleFlagErrors checks each vnetlab invocation of an example line
// (commands joined by &&, | or ;, a trailing # comment dropped): its verb
// exists and each of its flags is one the verb has.
func exampleFlagErrors(root *cobra.Command, line string) []string {
	line = " " + strings.TrimSpace(line)
	if i := strings.Index(line, " #"); i >= 0 {
		line = line[:i]
	}
	var errs []string
	for _, seg := range strings.FieldsFunc(line, func(r rune) bool { return r == '|' || r == ';' || r == '&' }) {
		f := strings.Fields(seg)
		i := 0
		for i < len(f) && f[i] != "vnetlab" {
			i++
		}
		if i == len(f) {
			continue // no vnetlab invocation in this command
		}
		args := f[i+1:]
		cmd, rest, err := root.Find(args)
		if err != nil || cmd.HasSubCommands() {
			errs = append(errs, "no such verb: "+strings.Join(args, " "))
			continue
		}
		for _, a := range rest {
			if a == "--" {
				break
			}
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			switch {
			case strings.HasPrefix(a, "--"):
				if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
					errs = append(errs, cmd.CommandPath()+" has no flag --"+name)
				}
			case strings.HasPrefix(a, "-") && len(a) == 2:
				if cmd.Flags().ShorthandLookup(name) == nil && cmd.InheritedFlags().ShorthandLookup(name) == nil {
					errs = append(errs, cmd.CommandPath()+" has no flag -"+name)
				}
			}
		}
	}
	return errs
}

// The example check itself: a wrong flag or verb is caught.
func TestExampleFlagErrors(t *testing.T) {
	root := newRoot()
	for line, bad := range map[string]bool{
		"  sudo vnetlab up --name x --mode bridge":                       false,
		"  vnetlab ls lab1 -o json | jq .":                               false,
		"  sudo vnetlab up --name x --nosuch 1":                          true,
		"  vnetlab ls -z":                                                true,
		"  vnetlab up --mode bridge && sudo vnetlab kube frobnicate":     true,
		"  vnetlab run --modes bridge   # a comment with --no-such-flag": false,
	} {
		if got := len(exampleFlagErrors(root, line)) > 0; got != bad {
			t.Errorf("%q: flagged %v, want %v (%v)", line, got, bad, exampleFlagErrors(root, line))
		}
	}
}

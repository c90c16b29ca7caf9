package main

import (
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/datapath/modes"
	"github.com/vnetlab/vnetlab/internal/platform/labservice"
)

// Help texts built from the registries (modes, providers), so that a new
// mode or provider appears in every --help without editing one.

// modeList is one line per mode: name and summary.
func modeList() string {
	var b strings.Builder
	for _, m := range modes.All() {
		fmt.Fprintf(&b, "  %-12s %s\n", m.Name, m.Summary)
	}
	return b.String()
}

// providerList is one line per Service provider: name and summary.
func providerList() string {
	var b strings.Builder
	for _, i := range labservice.Infos() {
		fmt.Fprintf(&b, "  %-9s %s\n", i.Name, i.Summary)
	}
	return b.String()
}

// defaultProviders says which provider a lab gets when none is named.
func defaultProviders() string {
	byProvider := map[string][]string{}
	for _, m := range modes.All() {
		if p := labservice.DefaultProviderFor(m); p != labservice.DefaultProvider {
			byProvider[p] = append(byProvider[p], m.Name)
		}
	}
	s := labservice.DefaultProvider
	for _, p := range labservice.Names() {
		if ms := byProvider[p]; len(ms) > 0 {
			s += "; " + p + " for " + strings.Join(ms, ", ")
		}
	}
	return s
}

// keepsEmpty names the providers that keep a Service without backends.
func keepsEmpty() string {
	return strings.Join(labservice.NamesWhere(func(i labservice.Info) bool { return i.KeepsEmptyServices }), " and ")
}

// ipFamilyHelp is --ip-family's help (up, run).
var ipFamilyHelp = "pods' IP family: ipv4, ipv6 or dual (dual-stack pods; run measures each family on them). Modes with IPv6: " + strings.Join(modes.IPv6Modes(), ", ")

package results

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Files before schema version 7 recorded the knobs in typed fields: the
// run's (settings.streams, size, links, load, rate, policies, ipblocks)
// and a cell's links' proof (links: what was asked, every link as the
// kernel kept it). They read into the generic fields, Settings.Knobs and
// Cell.Proofs, here.

// legacySettings are the knobs' fields of an older file's settings.
type legacySettings struct {
	Streams  int         `json:"streams"`
	Size     int         `json:"size"`
	Links    legacyLinks `json:"links"`
	Load     int         `json:"load"`
	Rate     string      `json:"rate"`
	Policies int         `json:"policies"`
	IPBlocks int         `json:"ipblocks"`
}

// legacyLinks are the link knobs asked.
type legacyLinks struct {
	MTU     int    `json:"mtu"`
	GSO     int    `json:"gso_max_size"`
	GRO     int    `json:"gro_max_size"`
	Offload string `json:"offload"`
}

// knobs are the links' knobs by name, the unset ones left out.
func (l legacyLinks) knobs() map[string]string {
	out := map[string]string{}
	for n, v := range map[string]int{"mtu": l.MTU, "gso": l.GSO, "gro": l.GRO} {
		if v != 0 {
			out[n] = strconv.Itoa(v)
		}
	}
	if l.Offload != "" {
		out["offload"] = l.Offload
	}
	return out
}

// UnmarshalJSON reads settings, an older file's knobs into Knobs.
func (s *Settings) UnmarshalJSON(b []byte) error {
	type plain Settings
	var old legacySettings
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &old); err != nil {
		return err
	}
	set := old.Links.knobs()
	for n, v := range map[string]int{"streams": old.Streams, "size": old.Size, "load": old.Load, "policies": old.Policies, "ipblocks": old.IPBlocks} {
		if v != 0 {
			set[n] = strconv.Itoa(v)
		}
	}
	if old.Rate != "" {
		set["rate"] = old.Rate
	}
	if len(set) > 0 && s.Knobs == nil {
		s.Knobs = set
	}
	return nil
}

// legacyLinkProof is an older cell's links' proof.
type legacyLinkProof struct {
	Requested legacyLinks `json:"requested"`
	Links     []struct {
		NS             string            `json:"ns"`
		Name           string            `json:"name"`
		Kind           string            `json:"kind"`
		MTU            int               `json:"mtu"`
		GSOMaxSize     uint32            `json:"gso_max_size"`
		GROMaxSize     uint32            `json:"gro_max_size"`
		GSOIPv4MaxSize uint32            `json:"gso_ipv4_max_size"`
		GROIPv4MaxSize uint32            `json:"gro_ipv4_max_size"`
		Features       map[string]string `json:"features"`
	} `json:"links"`
}

// UnmarshalJSON reads a cell, an older file's links' proof into Proofs
// (the cell's NotApplied already says why one is not in force).
func (c *Cell) UnmarshalJSON(b []byte) error {
	type plain Cell
	var old struct {
		Links *legacyLinkProof `json:"links"`
	}
	if err := json.Unmarshal(b, (*plain)(c)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &old); err != nil || old.Links == nil || c.Proofs != nil {
		return err
	}
	asked := old.Links.Requested.knobs()
	for _, l := range old.Links.Links {
		where := fmt.Sprintf("%s (%s) in %s", l.Name, l.Kind, l.NS)
		proof := func(knob, got string) {
			c.Proofs = append(c.Proofs, KnobProof{Knob: knob, Wanted: asked[knob], Got: got, Where: where})
		}
		proof("mtu", strconv.Itoa(l.MTU))
		proof("gso", strconv.Itoa(int(max(l.GSOMaxSize, l.GSOIPv4MaxSize))))
		proof("gro", strconv.Itoa(int(max(l.GROMaxSize, l.GROIPv4MaxSize))))
		if len(l.Features) > 0 {
			proof("offload", FeatureStates(l.Features))
		}
	}
	return nil
}

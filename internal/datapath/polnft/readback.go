package polnft

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vnetlab/vnetlab/internal/system/proc"
)

// Held is what a loaded table holds: its rules and its maps' elements, and
// the packets its pod chains' counters Evaluated and Denied saw.
type Held struct {
	Objects           int
	Evaluated, Denied uint64
}

// Objects counts the rules and map elements a script (Script) makes: what
// Read finds in the table it loads.
func Objects(script string) int {
	n := 0
	for _, l := range strings.Split(script, "\n") {
		switch {
		case strings.HasPrefix(l, "add rule "):
			n++
		case strings.HasPrefix(l, "add element "):
			n += strings.Count(l, ",") + 1
		}
	}
	return n
}

// Read lists the table in namespace ns (nft -j list table) and says what
// it holds.
func Read(ns string) (Held, error) {
	out, err := proc.Command(context.Background(), ns, "nft", "-j", "list", "table", "inet", Table).Output()
	if err != nil {
		return Held{}, fmt.Errorf("nft list table in %s: %w", ns, err)
	}
	return parseListing(out)
}

// parseListing reads nft's JSON listing of the table.
func parseListing(listing []byte) (Held, error) {
	var doc struct {
		Nftables []struct {
			Map *struct {
				Elem []json.RawMessage `json:"elem"`
			} `json:"map"`
			Rule    *struct{} `json:"rule"`
			Counter *struct {
				Name    string `json:"name"`
				Packets uint64 `json:"packets"`
			} `json:"counter"`
		} `json:"nftables"`
	}
	var h Held
	if err := json.Unmarshal(listing, &doc); err != nil {
		return h, fmt.Errorf("nft's JSON listing: %v", err)
	}
	for _, o := range doc.Nftables {
		switch {
		case o.Map != nil:
			h.Objects += len(o.Map.Elem)
		case o.Rule != nil:
			h.Objects++
		case o.Counter != nil:
			switch o.Counter.Name[strings.LastIndexByte(o.Counter.Name, '/')+1:] {
			case Evaluated:
				h.Evaluated += o.Counter.Packets
			case Denied:
				h.Denied += o.Counter.Packets
			}
		}
	}
	return h, nil
}

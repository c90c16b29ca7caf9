package knob

import (
	"fmt"

	"github.com/safchain/ethtool"
)

// Offloads are set and read through github.com/safchain/ethtool (the
// SIOCETHTOOL feature calls, ETHTOOL_[GS]FEATURES): github.com/mdlayher/ethtool,
// the ethtool-netlink library, reads and sets link modes, FEC, WoL and
// private flags but not features (v0.7.0). Both calls act on the network
// namespace the calling thread is in (nsutil.Do).

// fixedSuffix marks a feature the device cannot change.
const fixedSuffix = " (fixed)"

// setFeatures turns each feature of off on or off on link ifname: the
// kernel strings of it the device can change (verify reads back the rest).
func setFeatures(ifname string, off Offloads) error {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return err
	}
	defer e.Close()
	states, err := e.FeaturesWithState(ifname)
	if err != nil {
		return err
	}
	change := map[string]bool{}
	for name, on := range off {
		f, _ := featureByName(name)
		for _, s := range f.Strings {
			if states[s].Available {
				change[s] = on
			}
		}
	}
	if len(change) == 0 {
		return nil
	}
	return e.Change(ifname, change)
}

// readFeatures is each offload's state on ifname by short name: "on",
// "off" or "mixed" over the kernel strings the device has (it can change
// them, or they are on), " (fixed)" when it can change none of them:
// "off (fixed)" when it has none. The kernel lists every feature string
// for every device: one neither changeable nor on is one it lacks.
func readFeatures(ifname string) (map[string]string, error) {
	e, err := ethtool.NewEthtool()
	if err != nil {
		return nil, err
	}
	defer e.Close()
	states, err := e.FeaturesWithState(ifname)
	if err != nil {
		return nil, fmt.Errorf("ethtool features of %s: %w", ifname, err)
	}
	out := map[string]string{}
	for _, f := range Features {
		on, n, changeable := 0, 0, false
		for _, s := range f.Strings {
			st, ok := states[s]
			if !ok || (!st.Available && !st.Active) {
				continue
			}
			n++
			if st.Active {
				on++
			}
			changeable = changeable || st.Available
		}
		state := "mixed"
		switch on {
		case 0:
			state = "off"
		case n:
			state = "on"
		}
		if !changeable {
			state += fixedSuffix
		}
		out[f.Name] = state
	}
	return out, nil
}
